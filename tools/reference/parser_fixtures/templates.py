"""response_template test templates for the golden parser fixtures.

Real-model templates are the ones in transformers' tests/utils/test_chat_parsing.py (cohere,
ernie, gpt-oss, SmolLM, Qwen3, Gemma 4, Inkling); the Beam-style channel/<rfl:parameter> template
follows a public Beam-style router fixture; HERMES is beamserve's built-in template and must stay
identical to src/server/parsers/builtin_templates.cpp (a unit test checks this).
"""

COHERE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    "fields": {
        "content": {"open": "<|START_RESPONSE|>", "close": "<|END_RESPONSE|>", "content": "text"},
        "thinking": {"open": "<|START_THINKING|>", "close": "<|END_THINKING|>", "content": "text"},
        "tool_calls": {
            "open": "<|START_ACTION|>",
            "close": "<|END_ACTION|>",
            "content": "json",
            "transform_each": True,
            "transform": {"type": "function", "function": {"name": "{tool_name}", "arguments": "{parameters}"}},
        },
    },
}

ERNIE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "Assistant:",
    "fields": {
        "thinking": {"open_pattern": r"(?:^|<think>\s*)", "close": "</think>", "content": "text"},
        "content": {"open": "<response>\n", "close_pattern": r"\n?</response>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
    },
}

GPT_OSS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|start|>assistant",
    "fields": {
        "thinking": {"open": "<|channel|>analysis<|message|>", "close": "<|end|>", "content": "text"},
        "content": {"open": "<|channel|>final<|message|>", "close": "<|end|>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"<\|channel\|>commentary to=functions\.(?P<name>\w+).*?<\|message\|>",
            "close": "<|call|>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

SMOLLM = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}

QWEN3 = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r"<parameter=(?P<key>\w+)>\s*(?P<value>.*?)\s*</parameter>",
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

GEMMA4 = {
    "defaults": {"role": "assistant"},
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
    "fields": {
        "thinking": {"open": "<|channel>thought\n", "close": "<channel|>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"<\|tool_call>call:(?P<name>\w+)",
            "close": "<tool_call|>",
            "repeats": True,
            "content": "json",
            "content_args": {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": ["<turn|>", "<|tool_response>", "<eos>"], "content": "text"},
    },
}

INKLING = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|message_model|>",
    "fields": {
        "thinking": {
            "open_pattern": r"(?:<\|message_model\|>)?[^<]*<\|content_thinking\|>",
            "close": "<|end_message|>",
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "content": {
            "open_pattern": r"(?:<\|message_model\|>)?[^<]*<\|content_text\|>",
            "close": "<|end_message|>",
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "tool_calls": {
            "open_pattern": r"(?:<\|message_model\|>)?[^<]*<\|content_invoke_tool_json\|>",
            "close": "<|end_message|>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.args}"}},
        },
    },
}

# Beam-style turn layout (shared/spec/RESPONSE_TEMPLATE.md): gpt-oss-like channels, one
# <rfl:parameter name="KEY">VALUE</rfl:parameter> block per tool-call argument.
BEAM_CHANNEL = {
    "version": 1,
    "start_anchor_pattern": r"<\|start\|>assistant",
    "defaults": {"thinking": "", "content": "", "tool_calls": []},
    "fields": {
        "thinking": {"open_pattern": r"<\|channel\|>analysis<\|message\|>", "close": "<|end|>", "content": "text"},
        "content": {
            "open_pattern": r"<\|channel\|>final<\|message\|>",
            "close": ["<|return|>", "<|end|>"],
            "content": "text",
        },
        "tool_calls": {
            "open_pattern": r"(?:<\|start\|>assistant )?to=(?P<name>.+?)<\|channel\|>analysis(?: <\|constrain\|>xml)?<\|message\|>",
            "close": ["<|call|>", "<|end|>"],
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r'<rfl:parameter name="(?P<key>[^"]+)">(?P<value>.*?)</rfl:parameter>',
                "value_parser": {"name": "text", "args": {"strip": True}},
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

# beamserve's built-in template for the Qwen/Hermes layout (used when tokenizer_config.json has
# no response_template). Keep identical to src/server/parsers/builtin_templates.cpp.
HERMES = {
    "version": 1,
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "thinking": {"open": "<think>", "close_pattern": r"</think>\s*"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "repeats": True, "join": "\n\n"},
        # A </think> with no open region (the model closed a think block the prompt opened without
        # an anchor, or closed it after a tool call) is swallowed instead of leaking into content.
        "think_end": {"open_pattern": r"</think>\s*", "close_pattern": ""},
    },
}

XML_STRING_ARGS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {"tag_pattern": r"<parameter=(?P<key>\w+)>\s*(?P<value>.*?)\s*</parameter>"},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

XML_MERGE_DUPLICATES = {
    **XML_STRING_ARGS,
    "fields": {
        "tool_calls": {
            **XML_STRING_ARGS["fields"]["tool_calls"],
            "content_args": {
                "tag_pattern": r"<parameter=(?P<key>\w+)>\s*(?P<value>.*?)\s*</parameter>",
                "merge_duplicates": True,
            },
        }
    },
}

KV_LINES_TOOLS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>\n",
            "close": "</tool_call>",
            "repeats": True,
            "content": "kv-lines",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

CITATION = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "citation": {
            "open_pattern": r"<cite source=(?P<name>\w+)>",
            "close": "</cite>",
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r"<(?P<key>\w+)>\s*(?P<value>.*?)\s*</\1>",
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
            },
            "transform": {"source": "{name}", "fields": "{content}"},
        },
    },
}

DOTTED_TRANSFORM = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open": "<tool>",
            "close": "</tool>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.args}"}},
        },
    },
}

TRANSFORM_EACH = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open": "<actions>",
            "close": "</actions>",
            "content": "json",
            "transform_each": True,
            "transform": {"type": "function", "function": {"name": "{fn.name}", "arguments": "{fn.args}"}},
        },
    },
}

MISTRAL_ARRAY = {
    "defaults": {"role": "assistant"},
    "start_anchor_pattern": r"\[/INST\]",
    "fields": {
        "tool_calls": {
            "open": "[TOOL_CALLS]",
            "close": "</s>",
            "content": "json",
            "transform_each": True,
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
        },
        "content": {"close": "</s>"},
    },
}

JOIN = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "repeats": True, "join": " "},
        "content": {"repeats": True, "join": " "},
    },
}

LITERAL_LISTS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "x": {"open": ["<a>", "<bb>"], "close": ["</a>", "</bb>"], "content": "text"},
        "y": {"open": ["[[", "[[[", "[y]"], "close": ["]]", "]]]"], "content": "text", "repeats": True},
        "rest": {"close": ["END", "ENDX"]},
    },
}

SCALARS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "count": {"open": "<n>", "close": "</n>", "content": "int"},
        "ratio": {"open": "<f>", "close": "</f>", "content": "float"},
        "flag": {"open": "<b>", "close": "</b>", "content": "bool"},
        "metadata": {"open": "<meta>", "close": "</meta>", "content": "kv-lines"},
        "pipes": {
            "open": "<kv>",
            "close": "</kv>",
            "content": "kv-lines",
            "content_args": {"line_sep": ";", "kv_sep": "=", "value_parser": {"name": "int"}},
        },
        "raw": {"open": "<raw>", "close": "</raw>", "content_args": {"strip": False}},
        "blob": {"open": "<j>", "close": "</j>", "content": "json", "content_args": {"allow_non_json": True}},
    },
}

NO_CLOSE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {"content": {"open": "<resp>", "content": "text"}},
}

NULL_SINK = {
    "defaults": {"role": "assistant", "tool_calls": []},
    "start_anchor": "<|assistant|>",
    "fields": {
        "answer": {"open": "<answer>", "close": "</answer>", "optional": False},
        "tool_calls": {
            "open": "<call>",
            "close": "</call>",
            "repeats": True,
            "content": "json",
        },
    },
}

REGEX_ANCHORS = {
    "defaults": {"role": "assistant"},
    "start_anchor_pattern": r"<\|assistant\|>\s*",
    "fields": {
        "thinking": {"open_pattern": r"<think>\s*", "close_pattern": r"\s*</think>\s*"},
        "tool_calls": {
            "open_pattern": r"<tool_call\s+name=\"(?P<name>[^\"]+)\">",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close_pattern": r"(?=<tool_call)|<\|end\|>"},
    },
}

EOS_CLOSE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "[BEGIN]",
    "fields": {
        "tag": {"open": "<tag>", "close": "</tag>", "content": "text"},
        "body": {"close_pattern": r"$", "content": "text"},
    },
}

HISTORY = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {"content": {"close_pattern": r"\Z", "content": "text"}},
}

UNICODE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "«assistant»",
    "fields": {
        "thinking": {"open": "🤔", "close": "💡", "content": "text"},
        "tool_calls": {
            "open_pattern": r"⟦(?P<name>\w+)⟧",
            "close": "⟦/⟧",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": "«end»"},
    },
}
