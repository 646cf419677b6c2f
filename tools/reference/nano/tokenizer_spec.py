"""The beam-nano tokenizer's fixed parts: special tokens (ids 0..6 in this order), the Qwen2
pre-tokenizer regex, the ChatML chat template with <think> and JSON <tool_call> blocks (a
simplified Qwen3 template), and the tokenizer_config.json / tokenizer.json pipeline pieces.
Only Split(regex, isolated) + ByteLevel, NFC and a ByteLevel decoder are used, so the C++
tokenizer of src/text reproduces it exactly."""
from __future__ import annotations

import json
from pathlib import Path

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
THINK, END_THINK, TOOL_CALL, END_TOOL_CALL = "<think>", "</think>", "<tool_call>", "</tool_call>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, THINK, END_THINK, TOOL_CALL, END_TOOL_CALL]
VOCAB_SIZE = 8192

# Qwen2's pre-tokenizer pattern (single digits, contractions, letters with one leading non-letter,
# punctuation runs with trailing newlines, newline runs, whitespace not before a non-space).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# ChatML; assistant reasoning as <think>...</think>; tool calls as one JSON object per
# <tool_call> block (the built-in Hermes response_template of src/server parses this).
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.reasoning_content is defined and message.reasoning_content %}"
    "{{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- if message.tool_calls %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if (loop.first and message.content) or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}"
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def tokenizer_config(model_max_length: int) -> dict:
    """tokenizer_config.json contents (ids follow SPECIAL_TOKENS' order)."""
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)}
    return {
        "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [IM_START, IM_END, THINK, END_THINK, TOOL_CALL, END_TOOL_CALL],
        "bos_token": None, "eos_token": IM_END, "pad_token": ENDOFTEXT, "unk_token": None,
        "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "errors": "replace", "model_max_length": model_max_length, "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def write_tokenizer_config(out_dir, model_max_length: int) -> None:
    path = Path(out_dir) / "tokenizer_config.json"
    path.write_text(json.dumps(tokenizer_config(model_max_length), indent=2, ensure_ascii=False) + "\n")


def special_token_ids() -> dict:
    return {t: i for i, t in enumerate(SPECIAL_TOKENS)}
