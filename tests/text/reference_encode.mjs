// Encodes every document of a corpus (build_corpus.py format) with the official Hugging Face JS
// port (@huggingface/tokenizers, from tests/node) and writes one JSON array of ids per line.
// Documents are bytes; they become JS strings through TextDecoder (fatal: false, BOM kept), which
// is the replacement behaviour beamserve's encode mirrors for invalid UTF-8.
//
// usage: node reference_encode.mjs MODEL_DIR CORPUS.bin OUT.jsonl [--plain-specials OUT2.jsonl] [--warm]
//   --plain-specials: also encode the documents that contain special-token text with special
//   tokens treated as plain text (the tokenizer rebuilt without its special added tokens, which
//   is Hugging Face's split_special_tokens); other documents get a null line.
//   --warm: time a second pass too (BPE cache filled).
// Prints encode throughput (MB/s of UTF-8 input, one thread).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../node/package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");

const [modelDir, corpusPath, outPath] = process.argv.slice(2);
const plainIdx = process.argv.indexOf("--plain-specials");
const plainOut = plainIdx > 0 ? process.argv[plainIdx + 1] : null;
const timeWarm = process.argv.includes("--warm");
if (!modelDir || !corpusPath || !outPath) {
  console.error("usage: node reference_encode.mjs MODEL_DIR CORPUS.bin OUT.jsonl [--plain-specials OUT2.jsonl]");
  process.exit(2);
}

const tokenizerJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const configPath = path.join(modelDir, "tokenizer_config.json");
const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};

function readCorpus(file) {
  const buf = fs.readFileSync(file);
  const docs = [];
  for (let pos = 0; pos < buf.length;) {
    const len = buf.readUInt32LE(pos);
    docs.push(buf.subarray(pos + 4, pos + 4 + len));
    pos += 4 + len;
  }
  return docs;
}

const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const docs = readCorpus(corpusPath).map((b) => decoder.decode(b));
const totalBytes = docs.reduce((n, d) => n + Buffer.byteLength(d, "utf8"), 0);

// Wall seconds and CPU seconds (this process, all threads: V8's helpers included).
function encodeAll(tokenizer, keep = () => true) {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const ids = docs.map((d) => (keep(d) ? tokenizer.encode(d, { add_special_tokens: false }).ids : null));
  const c1 = process.cpuUsage(c0);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { ids, seconds, cpu: (c1.user + c1.system) / 1e6 };
}

function writeJsonl(file, rows) {
  fs.writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
}

const tokenizer = new Tokenizer(tokenizerJson, config);
const cold = encodeAll(tokenizer);
writeJsonl(outPath, cold.ids);
const mb = totalBytes / 1e6;
const rate = (r) => `${(mb / r.seconds).toFixed(2)} MB/s wall, ${(mb / r.cpu).toFixed(2)} MB/s CPU`;
let line = `reference (@huggingface/tokenizers): ${docs.length} docs, ${mb.toFixed(2)} MB; ` +
           `first pass ${rate(cold)}`;
if (timeWarm) line += `; warm pass ${rate(encodeAll(tokenizer))}`;
console.log(line);

if (plainOut) {
  const plainJson = { ...tokenizerJson, added_tokens: tokenizerJson.added_tokens.filter((t) => !t.special) };
  const specialSet = new Set(tokenizerJson.added_tokens.filter((t) => t.special).map((t) => t.content));
  const plainConfig = { ...config, additional_special_tokens: [], added_tokens_decoder: {} };
  for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
    if (specialSet.has(config[key])) plainConfig[key] = null;
  }
  const hasSpecialText = (d) => [...specialSet].some((c) => d.includes(c));
  writeJsonl(plainOut, encodeAll(new Tokenizer(plainJson, plainConfig), hasSpecialText).ids);
}
