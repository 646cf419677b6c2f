// Every subcommand's usage text: printed by `beamserve <command> --help` (cli/main.cpp, to stdout,
// exit 0) and after a command's argument errors (to stderr).
#pragma once

namespace beam::cli {

inline constexpr const char* kForwardUsage =
    "usage: beamserve forward --model DIR --tokens 1,2,3 [--start-pos N] [--threads N]\n"
    "         [--device cpu|cuda] [--attention-probs fp32|bf16] --logits-out FILE.npy\n";

inline constexpr const char* kGenerateUsage =
    "usage: beamserve generate [--model DIR] (--tokens 1,2,3 | --prompt TEXT) [--max-tokens N]\n"
    "         [--temperature T] [--top-p P] [--top-k K] [--min-p M] [--seed S] [--threads N]\n"
    "         [--device cpu|cuda] [--no-cuda-graphs] [--attention-probs fp32|bf16]\n"
    "         [--enable-deterministic-inference (as serve's)]\n"
    "         [--load-format auto|safetensors|dummy (dummy: random weights of the config)]\n"
    "         [--grammar GBNF_OR_LARK | --grammar-file F | --json-schema JSON |\n"
    "          --json-schema-file F | --regex RE]  (the whole output matches it)\n";

inline constexpr const char* kInspectUsage =
    "usage: beamserve inspect --model DIR [--gpu-memory-gb 141] [--num-gpus 1] [--max-seqs 256]\n"
    "                         [--activation-reserve-gb GB] [--json]\n"
    "  GB = 10^9 bytes. Memory plan per GPU: weights / num-gpus, an activation reserve (default\n"
    "  max(2 GiB, 4% of GPU memory)), a sliding-window KV pool of max-seqs x sliding_window "
    "tokens,\n"
    "  and the rest as the full-attention KV pool.\n";

inline constexpr const char* kTokenizeUsage =
    "usage: beamserve tokenize --model DIR (--text T | --file F) [--special]\n";

inline constexpr const char* kDetokenizeUsage =
    "usage: beamserve detokenize --model DIR --ids 1,2,3 [--skip-special]\n";

inline constexpr const char* kChatTemplateUsage =
    "usage: beamserve chat-template --model DIR --messages FILE.json [--tools FILE.json]\n"
    "                               [--add-generation-prompt] [--enable-thinking=true|false]\n";

inline constexpr const char* kRunBatchUsage =
    "usage: beamserve run-batch -i FILE|- -o FILE|- [--max-in-flight 256] [serve's model, engine\n"
    "         and request flags: --model DIR, --tokenizer DIR, --device, --kv-budget-mb, ...]\n"
    "  Each input line {\"custom_id\", \"method\": \"POST\", \"url\", \"body\"} (OpenAI's batch\n"
    "  format; url: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses,\n"
    "  /v1/messages, /pooling, /score, /rerank and their /v1 forms) is answered in process, one\n"
    "  line out per line in, in order: {\"id\", \"custom_id\", \"response\": {\"status_code\",\n"
    "  \"request_id\", \"body\"}, \"error\"}. A line that cannot be sent has response null and\n"
    "  error {\"code\", \"message\"}. Exit 0 once every line is answered.\n";

inline constexpr const char* kServeUsage =
    "usage: beamserve serve [--model DIR] [--tokenizer DIR] [--served-model-name NAME]\n"
    "         [--host 127.0.0.1] [--port 8000] [--api-key KEY | $BEAMSERVE_API_KEY] [--max-body-mb "
    "32]\n"
    "         [--device cpu|cuda] [--kv-budget-mb N (cpu: 1024; cuda: free memory)] "
    "[--max-model-len N] [--max-running 256]\n"
    "         [--max-tokens-per-step N (a CUDA device of >= 70 GiB: 8192; else 2048)]\n"
    "         [--block-size 64] [--threads N] [--io-threads 1] [--workers 2] [--no-prefix-cache] "
    "[--no-cuda-graphs]\n"
    "         [--enable-hierarchical-cache (evicted prefix-cache blocks go to host memory and come\n"
    "          back on a hit; SGLang's HiCache) [--hicache-ratio 2 (host blocks per device block)]\n"
    "          [--hicache-size GB (host memory; overrides the ratio)]\n"
    "          [--hicache-write-policy write_back|write_through|write_through_selective]]\n"
    "         [--health-stall-s 30] [--attention-probs fp32|bf16 (bf16: FlashAttention's rounding "
    "of P)]\n"
    "         [--enable-deterministic-inference (on the GPU too, a request's tokens and logprobs do\n"
    "          not depend on the batch around it or its chunking: one kernel path per shape; the\n"
    "          CPU always is)]\n"
    "         [--tensor-parallel-size N | --tp-size N (the model split over N ranks: heads, "
    "widths\n"
    "          and vocabulary split, experts whole per rank; GPUs 0..N-1 through NCCL, or CPU\n"
    "          threads; default 1)]\n"
    "         [--data-parallel-size N | --dp-size N (N replicas of the engine, each its own KV\n"
    "          pools and scheduler; on GPUs d*T..d*T+T-1 for replica d at --tp-size T, or CPU\n"
    "          threads split between them; default 1)\n"
    "          [--load-balance-method cache_aware|shortest_queue|round_robin|minimum_tokens (how\n"
    "          a request's replica is picked unless it names one: data_parallel_rank /\n"
    "          routed_dp_rank; cache_aware: the replica that holds its prefix)]]\n"
    "         [--enable-return-routed-experts (requests may ask for their routed experts)]\n"
    "         [--enable-return-hidden-states (requests may ask for their final hidden states)]\n"
    "         [--trust-request-chat-template (requests may send their own chat_template)]\n"
    "         [--enable-weight-updates (POST /update_weights_from_disk loads new weights)]\n"
    "         [--merge-lora DIR (a PEFT LoRA adapter merged into the weights as they load)]\n"
    "         [--load-format auto|safetensors|dummy (dummy: random weights of DIR/config.json,\n"
    "          no checkpoint read; vLLM's and SGLang's, for benchmarks)]\n"
    "         [--lora-modules NAME=DIR[,NAME=DIR...] ... (PEFT LoRA adapters served per request\n"
    "          as models of those names; also vLLM's JSON {\"name\", \"path\"}; the flag may\n"
    "          repeat; more with POST /v1/load_lora_adapter)]\n"
    "         [--lora-paths NAME=DIR|DIR ... (SGLang's spelling of the same; also its JSON\n"
    "          {\"lora_name\", \"lora_path\"})]\n"
    "         [--lora-resolver-dir DIR (a request naming an adapter not loaded loads DIR/NAME)]\n"
    "         [--enable-lora] [--max-loras N (adapters one step serves; default 4 with LoRA, else\n"
    "          0; SGLang's --max-loras-per-batch)] [--max-lora-rank R (highest adapter rank;\n"
    "          default 16)]\n"
    "         [--max-loaded-loras N (the most adapters loaded at once, >= --max-loras; default\n"
    "          any number)]\n"
    "         [--lora-experts (per-request LoRA on the routed experts too: E times a dense MLP's\n"
    "          slot memory a layer)]\n"
    "         [--enable-sleep-mode (POST /sleep and /wake_up give the KV and weight memory back)]\n"
    "         [--logprobs-mode scaled|raw (logprobs of the logits / temperature, or of the raw\n"
    "          logits as vLLM's raw_logprobs; a request's logprobs_mode overrides it)]\n"
    "         [--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": K,\n"
    "          \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 4}' (vLLM's: each decode verifies "
    "up to K\n"
    "          n-gram drafts; sampling stays exact; \"disable_by_batch_size\": N: none at N "
    "running)]\n"
    "         [--speculative-algorithm NGRAM --speculative-num-draft-tokens K+1\n"
    "          --speculative-ngram-{min,max}-match-window-size N (SGLang's spelling)]\n"
    "         [--speculative-algorithm DFLASH --speculative-draft-model-path DIR, or\n"
    "          --speculative-config '{\"method\": \"dflash\", \"model\": DIR}' (a DFlash2 "
    "drafter's\n"
    "          blocks, docs/dflash2.md; on the CPU or a GPU, any --tp-size)]\n";

inline constexpr const char* kBenchUsage =
    "usage: beamserve bench offline|step|kernels|serve [flags]   (bench <name> --help: its flags)\n"
    "  offline: the engine on a model's synthetic workloads\n"
    "  step, kernels, serve: beam-slice (BEAM.md widths, random weights) on --device cpu|cuda\n";

// The flags step, kernels and serve share (cli/bench_common.h), printed after their own.
inline constexpr const char* kBenchSliceFlags =
    "  beam-slice and device: [--device cpu|cuda] [--threads N] [--layers N] [--dense-layers 1]\n"
    "         [--config DIR (models/beam-1.0-config)] [--weight-seed 1]\n"
    "         [--attention-probs fp32|bf16] [--no-cuda-graphs] [--no-pdl] [--json FILE]\n"
    "         [--enable-deterministic-inference (as serve's)] [--commit REV]\n";

inline constexpr const char* kBenchOfflineUsage =
    "usage: beamserve bench offline [--model DIR] [--workload uniform|shared-prefix|agentic]\n"
    "         [--requests 32] [--prompt-len 256] [--shared-prefix-len 512] [--output-len 64]\n"
    "         [--conversations 8] [--turns 13] [--first-prompt-len 2048] [--turn-append-len 750]\n"
    "         [--one-off-per-turn 0 (agentic: unrelated prompts sent beside every turn)]\n"
    "         [--seed 1] [--kv-budget-mb N] [--block-size 64] [--max-running 64]\n"
    "         [--max-step-tokens N (the engine's default for the device)] [--threads N]\n"
    "         [--device cpu|cuda] [--no-cuda-graphs] [--no-prefix-cache]\n"
    "         [--enable-hierarchical-cache [--hicache-ratio R] [--hicache-size GB] (as serve's)]\n"
    "         [--attention-probs fp32|bf16] [--json] [--speculative-config JSON (as serve's)]\n"
    "         [--load-format auto|safetensors|dummy (as serve's)]\n"
    "         [--enable-deterministic-inference (as serve's)]\n"
    "         [--data-parallel-size N | --dp-size N] [--load-balance-method M] (as serve's)\n";

inline constexpr const char* kBenchStepUsage =
    "usage: beamserve bench step [--batches 1,8,32,128] [--context 512] [--warmup 3] [--steps 20]\n"
    "         [--prefill-tokens 8192 (0: none)] [--prefill-reps 3] [--prefill-chunk 8192]\n"
    "         [--block-size 64] [--seed 1] [--breakdown] [--breakdown-steps 5]\n"
    "         [--lora-slots 0 (S: sequence s uses adapter slot s % S)] [--lora-rank 16]\n"
    "         [--lora-experts (the slots serve the routed experts too)]\n"
    "         [--draft-tokens K (each decode a speculative verification of 1 + K tokens a\n"
    "          sequence)]\n"
    "  beam-slice: 6 layers unless --layers says otherwise\n";

inline constexpr const char* kBenchKernelsUsage =
    "usage: beamserve bench kernels [--batches 1,32,128] [--context 512] [--chunk-rows 0]\n"
    "         [--prefill-tokens 8192 (0: none)] [--reps 20]\n";

inline constexpr const char* kBenchServeUsage =
    "usage: beamserve bench serve [--concurrency 1,8,32] [--prompt-len 512] [--output-len 128]\n"
    "         [--kv-budget-mb N] [--max-step-tokens N (the engine's default for the device)]\n"
    "         [--seed 1] [--json-schema FILE --tokenizer DIR] [--speculative-config JSON (as "
    "serve's)]\n"
    "         [--tensor-parallel-size N (the engine split over GPUs 0..N-1, as serve's)]\n"
    "         [--data-parallel-size N | --dp-size N] [--load-balance-method M] (as serve's)\n"
    "  beam-slice: 2 layers unless --layers says otherwise; --json-schema: every output is JSON "
    "of\n"
    "  the schema (structured output over DIR's tokenizer; outputs may end before --output-len)\n";

}  // namespace beam::cli
