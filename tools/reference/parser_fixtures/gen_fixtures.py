#!/usr/bin/env python3
"""Golden fixtures for beamserve's response_template parser, produced by transformers' own
`parse_response` (transformers.utils.chat_parsing, 5.x).

    python3 gen_fixtures.py OUTDIR                      # transformers installed (GPU machine)
    python3 gen_fixtures.py OUTDIR --hf-source SRC_DIR  # a transformers source checkout's
                                                        # src/transformers/utils/chat_parsing dir
                                                        # (needs the `regex` package)

Writes OUTDIR/<template>.json (template, cases: prefix, output, tools, expected result or
expected error) and OUTDIR/schema_errors.json (templates transformers rejects at load).
"""

import argparse
import copy
import importlib.util
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import templates as T  # noqa: E402


def load_parse_response(hf_source):
    """Returns (parse_response, generated_by)."""
    if hf_source is None:
        import transformers
        from transformers.utils.chat_parsing import parse_response

        return parse_response, f"transformers {transformers.__version__} parse_response"
    # Standalone: load the chat_parsing package with stand-ins for its two transformers imports
    # (a logger, and get_json_schema which only matters for Python-callable tools).
    root = types.ModuleType("hfshim")
    root.__path__ = []
    utils = types.ModuleType("hfshim.utils")
    utils.__path__ = []
    logging_mod = types.ModuleType("hfshim.utils.logging")
    import logging as std_logging

    logging_mod.get_logger = std_logging.getLogger
    utils.logging = logging_mod
    cte = types.ModuleType("hfshim.utils.chat_template_utils")
    cte.get_json_schema = lambda fn: (_ for _ in ()).throw(NotImplementedError("callable tools"))
    sys.modules.update({"hfshim": root, "hfshim.utils": utils, "hfshim.utils.logging": logging_mod,
                        "hfshim.utils.chat_template_utils": cte})
    spec = importlib.util.spec_from_file_location(
        "hfshim.utils.chat_parsing", os.path.join(hf_source, "__init__.py"),
        submodule_search_locations=[hf_source])
    module = importlib.util.module_from_spec(spec)
    sys.modules["hfshim.utils.chat_parsing"] = module
    spec.loader.exec_module(module)
    return module.parse_response, f"transformers chat_parsing source at {hf_source} (standalone; provisional)"


TOOLS_ALARM = [{"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
    "hour": {"type": "integer"}, "enabled": {"type": "boolean"}, "label": {"type": "string"},
    "ratio": {"type": "number"}, "tags": {"type": "array"}, "opts": {"type": "object"},
    "note": {"type": ["integer", "null"]}, "maybe": {"anyOf": [{"type": "string"}, {"type": "object"}]},
    "snooze": {"type": "integer", "nullable": True}}}}}]
TOOLS_WEATHER = [
    {"type": "function", "function": {"name": "weather.lookup", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "calendar.lookup", "parameters": {"type": "object", "properties": {
        "day": {"type": "string"}, "window": {"type": "object"}}}}},
]

COHERE_OUT = ('<|START_THINKING|>I should call a tool.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", '
              '"tool_name": "simple_tool", "parameters": {"temperature_format": "Celsius"}}\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>')
QWEN_PROMPT = ("<|im_start|>system\nYou are helpful. Call tools as <tool_call>{...}</tool_call>.<|im_end|>\n"
               "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nEarlier <think>x</think> reply<|im_end|>\n"
               "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n")
BEAM_PROMPT = "<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant"

# template name → (template, [(case name, prefix, output, tools)])
CASES = {
    "cohere": (T.COHERE, [
        ("tool_call", "", COHERE_OUT, None),
        ("response", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
         "<|START_THINKING|>Plan.<|END_THINKING|><|START_RESPONSE|>Hello there!<|END_RESPONSE|>", None),
        ("typed_json_with_tools", "", '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "set_alarm", '
         '"parameters": {"hour": 7, "enabled": true}}]<|END_ACTION|>', TOOLS_ALARM),
    ]),
    "ernie": (T.ERNIE, [
        ("tool_call", "", "The user asks about Paris.\n</think>\n\n<tool_call>\n{\"name\": \"get_current_temperature\", "
         "\"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n</s>", None),
        ("response", "", "Greeting.\n</think>\n\n<response>\nHello! How can I help?\n</response>\n</s>", None),
        ("prefixed", "User: hi\nAssistant:", "<think>short</think><response>\nok\n</response>", None),
    ]),
    "gpt_oss": (T.GPT_OSS, [
        ("tool_call", "", "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_current_weather <|constrain|>json<|message|>{\n  \"location\": \"San Francisco, CA\"\n}", None),
        ("final", "", "<|channel|>analysis<|message|>2+2=4.<|end|><|start|>assistant<|channel|>final<|message|>2", None),
        ("two_calls", "<|start|>user<|message|>x<|end|><|start|>assistant",
         "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\": 1}<|call|>"
         "<|start|>assistant<|channel|>commentary to=functions.b<|message|>{}<|call|>", None),
    ]),
    "smollm": (T.SMOLLM, [
        ("thinking_and_tool", "", "<think>\nGreet them.\n</think>\n\n<tool_call>{\"name\": \"greet_user\", "
         "\"arguments\": {\"greeting\": \"Hello! I'm fine.\"}}</tool_call>", None),
        ("thinking_content", "", "<think>\nGravity.</think>\nSome content about gravity.", None),
        ("prefill_content", "<|im_start|>assistant\nSure, here is", " the answer<|im_end|>", None),
        ("content_before_and_after_tool", "", "Let me check.<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>Done.",
         None),
        ("malformed_tool_json", "", "<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>", None),
        ("empty", "", "", None),
    ]),
    "qwen3": (T.QWEN3, [
        ("tool_calls", "", "<tool_call>\n<function=get_weather>\n<parameter=locations>\n[{\"country\": \"France\", "
         "\"city\": \"Paris\"}]\n</parameter>\n<parameter=temp_units>\ncelsius\n</parameter>\n</function>\n</tool_call>", None),
        ("prefix_in_thinking", QWEN_PROMPT + "<think>\n", "Let me think...</think>\nIt is sunny.", None),
        ("prefix_partial_delimiter", "<|im_start|>assistant\n<thi", "nk>real body</think>", None),
        ("anchor_missing", "<think>\n", "hi</think>", None),
        ("tools_cast_leftover_strings", "", "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n007\n</parameter>\n"
         "<parameter=enabled>\ntrue\n</parameter>\n<parameter=label>\n1.50\n</parameter>\n</function>\n</tool_call>",
         TOOLS_ALARM),
    ]),
    "gemma4": (T.GEMMA4, [
        ("tool_call", "", "<|channel>thought\nCheck tools.<channel|><|tool_call>call:get_current_temperature{detail_level:0,"
         "location:<|\"|>Paris, France<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|><|tool_response>", None),
        ("complex", "<|turn>user\nhi<turn|>\n<|turn>model\n", "<|channel>thought\nLet me call.<channel|><|tool_call>call:foo"
         "{bool_value:true,list_value:[<|\"|>foo<|\"|>,<|\"|>bar<|\"|>],null_value:null,number_value:1,"
         "string_value:<|\"|>a, b: {c}<|\"|>,struct_value:{foo:<|\"|>bar<|\"|>}}<tool_call|>", None),
        ("after_tool_response", "<|turn>model\n<|tool_call>call:x{}<tool_call|><|tool_response>r<tool_response|>",
         "It is 20 degrees.<turn|>", None),
    ]),
    "inkling": (T.INKLING, [
        ("multi_block", "<|message_system|><|content_text|>Effort 0.9<|end_message|><|message_model|>",
         "<|content_thinking|>Consider the weather.<|end_message|><|message_model|><|content_thinking|> Tokyo, probably."
         "<|end_message|><|message_model|><|content_text|>Checking now.<|end_message|><|message_model|>get_weather"
         "<|content_invoke_tool_json|>{\"name\":\"get_weather\",\"args\":{\"city\":\"Tokyo\",\"units\":\"C\"}}<|end_message|>"
         "<|content_model_end_sampling|>", None),
    ]),
    "beam_channel": (T.BEAM_CHANNEL, [
        ("two_calls_then_final", BEAM_PROMPT,
         "<|channel|>analysis<|message|>careful reasoning<|end|>"
         "<|start|>assistant to=weather.lookup<|channel|>analysis <|constrain|>xml<|message|>"
         "<rfl:parameter name=\"city\">Paris</rfl:parameter><rfl:parameter name=\"days\">2</rfl:parameter><|call|>"
         "<|start|>assistant to=calendar.lookup<|channel|>analysis <|constrain|>xml<|message|>"
         "<rfl:parameter name=\"day\">tomorrow</rfl:parameter><|end|>"
         "<|channel|>final<|message|>The result is ready.<|return|>THIS_TEXT_MUST_NOT_BE_EMITTED", None),
        ("tools_cast", BEAM_PROMPT,
         "<|channel|>analysis<|message|>Look it up.<|end|>"
         "<|start|>assistant to=weather.lookup<|channel|>analysis <|constrain|>xml<|message|>"
         "<rfl:parameter name=\"city\"> Paris </rfl:parameter><rfl:parameter name=\"days\">3</rfl:parameter>"
         "<rfl:parameter name=\"metric\">True</rfl:parameter><|call|>"
         "<|start|>assistant to=calendar.lookup<|channel|>analysis <|constrain|>xml<|message|>"
         "<rfl:parameter name=\"window\">{\"from\": 1, \"to\": 2}</rfl:parameter><|call|>", TOOLS_WEATHER),
        ("final_only", BEAM_PROMPT, "<|channel|>final<|message|>Hi! 👋<|return|>", None),
        ("multiline_argument", BEAM_PROMPT, "<|channel|>analysis<|message|>x<|end|>to=weather.lookup<|channel|>analysis"
         "<|message|><rfl:parameter name=\"city\">New\nYork</rfl:parameter><|call|>", TOOLS_WEATHER),
        ("truncated_mid_call", BEAM_PROMPT, "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=weather.lookup"
         "<|channel|>analysis <|constrain|>xml<|message|><rfl:parameter name=\"city\">Par", None),
    ]),
    "hermes_builtin": (T.HERMES, [
        ("think_tools_content", QWEN_PROMPT, "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n\n<tool_call>\n"
         "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n"
         "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nBoth requested.", None),
        ("prefilled_think", QWEN_PROMPT + "<think>\n", "Quick thought.</think>\n\nIt is sunny.<|im_end|>", None),
        ("plain", QWEN_PROMPT, "Hello! How can I help you today?", None),
        ("malformed_tool_json", QWEN_PROMPT, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>", None),
        ("unterminated_think", QWEN_PROMPT, "<think>\nStill thinking when cut off", None),
        ("bare_think_close", QWEN_PROMPT, "Reasoning without an open tag.\n</think>\n\nThe answer.", None),
        ("tool_call_inside_think", QWEN_PROMPT, "<think>Call it.<tool_call>{\"name\": \"f\", \"arguments\": {}}"
         "</tool_call></think>\nDone.", None),
    ]),
    "xml_string_args": (T.XML_STRING_ARGS, [
        ("no_tools", "", "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n<parameter=enabled>\ntrue\n"
         "</parameter>\n<parameter=label>\nwake up\n</parameter>\n</function>\n</tool_call>", None),
        ("tools_all_types", "", "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n 7 \n</parameter>\n<parameter=enabled>\n"
         "False\n</parameter>\n<parameter=label>\n1.50\n</parameter>\n<parameter=ratio>\n1e3\n</parameter>\n<parameter=tags>\n"
         "[\"a\", \"b\"]\n</parameter>\n<parameter=opts>\n[1]\n</parameter>\n<parameter=note>\nNone\n</parameter>\n"
         "<parameter=maybe>\n{\"a\": 1}\n</parameter>\n<parameter=snooze>\nnull\n</parameter>\n<parameter=extra>\n5\n"
         "</parameter>\n</function>\n</tool_call>", TOOLS_ALARM),
        ("tools_failed_casts", "", "<tool_call>\n<function=set_alarm>\n<parameter=hour>\nseven\n</parameter>\n"
         "<parameter=enabled>\nyes\n</parameter>\n<parameter=ratio>\nnan\n</parameter>\n<parameter=opts>\n{bad\n"
         "</parameter>\n</function>\n</tool_call>", TOOLS_ALARM),
        ("unknown_tool", "", "<tool_call>\n<function=other>\n<parameter=hour>\n7\n</parameter>\n</tool_call>", TOOLS_ALARM),
    ]),
    "xml_merge_duplicates": (T.XML_MERGE_DUPLICATES, [
        ("merged_cast", "", "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n<parameter=hour>\n9\n"
         "</parameter>\n<parameter=hour>\nx\n</parameter>\n</function>\n</tool_call>", TOOLS_ALARM),
        ("merged_plain", "", "<tool_call><function=set_alarm><parameter=a>1</parameter><parameter=a>2</parameter>"
         "</tool_call>", None),
    ]),
    "kv_lines_tools": (T.KV_LINES_TOOLS, [
        ("cast", "", "<tool_call>\n<function=set_alarm>\nhour: 7\nenabled: true\nlabel: a: b\n</tool_call>", TOOLS_ALARM),
        ("plain", "", "<tool_call>\n<function=set_alarm>\nhour: 7\nno separator line\n\n</tool_call>", None),
    ]),
    "citation": (T.CITATION, [
        ("with_tools", "", "<cite source=set_alarm><label>1.50</label><hour>7</hour></cite>", TOOLS_ALARM),
    ]),
    "dotted_transform": (T.DOTTED_TRANSFORM, [
        ("nested", "", "<tool>{\"name\": \"get_weather\", \"args\": {\"city\": {\"id\": 7}}}</tool>", None),
        ("missing_key", "", "<tool>{\"name\": \"n\"}</tool>", None),
        ("index_into_str", "", "<tool>{\"name\": \"n\", \"args\": \"s\"}</tool>", None),
    ]),
    "transform_each": (T.TRANSFORM_EACH, [
        ("list", "", "<actions>[{\"fn\": {\"name\": \"a\", \"args\": {\"x\": 1}}}, {\"fn\": {\"name\": \"b\", \"args\": {}}}]"
         "</actions>", None),
        ("not_a_list", "", "<actions>{\"fn\": 1}</actions>", None),
        ("element_not_dict", "", "<actions>[1]</actions>", None),
    ]),
    "mistral_array": (T.MISTRAL_ARRAY, [
        ("calls", "[INST] hi [/INST]", "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}, {\"name\": \"b\", "
         "\"arguments\": {}}]</s>", None),
        ("text", "[INST] one [/INST]ok</s>[INST] two [/INST]", "Plain answer.</s>", None),
    ]),
    "join": (T.JOIN, [
        ("two_each", "", "<think>first</think>middle<think>second</think>done", None),
        ("only_thinking", "", "<think>only</think>", None),
        ("empty_instance", "", "<think></think><think> b </think>", None),
    ]),
    "literal_lists": (T.LITERAL_LISTS, [
        ("x_variants", "", "<a>hi</bb>tail<bb>two</a>", None),
        ("y_overlapping", "", "[[[deep]]] and [[flat]] and [y]why]]", None),
        ("rest_close_extend", "", "hiENDX more", None),
        ("rest_close_short", "", "hiEND more", None),
    ]),
    "scalars": (T.SCALARS, [
        ("all", "", "<n> 42 </n><f>-1_0.5e1</f><b> TRUE </b><meta>name: alice\nage: 30\n\nbad line</meta>"
         "<kv>a=1; b = 2;c=3</kv><raw>  spaced  </raw><j>not json</j>", None),
        ("int_error", "", "<n>4.2</n>", None),
        ("float_variants", "", "<f>.5e-3</f><b>0</b><n>+7</n>", None),
        ("json_object", "", "<j> {\"a\": [1, 2.5, true, null]} </j>", None),
    ]),
    "no_close": (T.NO_CLOSE, [
        ("runs_to_end", "", "<resp>hello world", None),
        ("before_open_dropped", "", "dropped <resp>kept", None),
    ]),
    "null_sink": (T.NULL_SINK, [
        ("answer", "", "noise <answer>42</answer> more noise <call>{\"a\": 1}</call>", None),
        ("missing_required", "", "no answer here", None),
    ]),
    "regex_anchors": (T.REGEX_ANCHORS, [
        ("tool", "<|assistant|>\n", "<think>\n plan \n</think>\n Calling.<tool_call name=\"f\">{\"k\": [1]}</tool_call>after<|end|>",
         None),
        ("zero_width_close_sticks", "", "Text before <tool_call>bad</tool_call> never parsed", None),
    ]),
    "eos_close": (T.EOS_CLOSE, [
        ("prefix_region", "noise[BEGIN]<tag>silently consumed</tag>", "real generated body", None),
        ("trailing_newline", "", "body text\n", None),
    ]),
    "history": (T.HISTORY, [
        ("with_prefix", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Hello there!", None),
        ("anchor_in_output", "", "<|im_start|>assistant\nkept", None),
    ]),
    "unicode": (T.UNICODE, [
        ("mixed", "«user» hi «assistant»", "🤔 думаю… 💡Ответ: ✓⟦search⟧{\"q\": \"日本\"}⟦/⟧ 完了«end»", None),
    ]),
}

SCHEMA_ERRORS = {
    "not_a_dict": [1, 2],
    "version_2": {"version": 2, "start_anchor": "a", "fields": {"c": {}}},
    "unknown_top_key": {"start_anchor": "a", "fields": {"c": {}}, "extra": 1, "another": 2},
    "defaults_not_dict": {"start_anchor": "a", "defaults": [], "fields": {"c": {}}},
    "fields_empty": {"start_anchor": "a", "fields": {}},
    "fields_missing": {"start_anchor": "a"},
    "field_not_dict": {"start_anchor": "a", "fields": {"c": "text"}},
    "unknown_field_key": {"start_anchor": "a", "fields": {"c": {"opn": "<x>", "clse": "</x>"}}},
    "unknown_content_parser": {"start_anchor": "a", "fields": {"c": {"content": "yaml"}}},
    "open_and_open_pattern": {"start_anchor": "a", "fields": {"c": {"open": "<x>", "open_pattern": "<x>"}}},
    "close_and_close_pattern": {"start_anchor": "a", "fields": {"c": {"close": "<x>", "close_pattern": "<x>"}}},
    "empty_literal_list": {"start_anchor": "a", "fields": {"c": {"open": []}}},
    "empty_literal": {"start_anchor": "a", "fields": {"c": {"open": ["<a>", ""]}}},
    "non_string_literal": {"start_anchor": "a", "fields": {"c": {"open": [1, 2]}}},
    "dict_literal": {"start_anchor": "a", "fields": {"c": {"open": {"foo": "bar"}}}},
    "invalid_open_pattern": {"start_anchor": "a", "fields": {"c": {"open_pattern": "(unclosed"}}},
    "invalid_close_pattern": {"start_anchor": "a", "fields": {"c": {"open": "<", "close_pattern": "[z-a]"}}},
    "two_implicit": {"start_anchor": "a", "fields": {"a": {"content": "text"}, "b": {"content": "text"}}},
    "named_groups_without_transform": {"start_anchor": "a", "fields": {"t": {"open_pattern": r"<tool name=(?P<name>\w+)>",
                                                                              "close_pattern": r"</(?P<tag>\w+)>"}}},
    "transform_interpolation": {"start_anchor": "a", "fields": {"t": {"open": "<t>", "transform": {"label": "name: {content}"}}}},
    "transform_dotted_interpolation": {"start_anchor": "a", "fields": {"t": {"open": "<t>", "transform": ["pre {content.args}"]}}},
    "transform_each_not_bool": {"start_anchor": "a", "fields": {"t": {"open": "<t>", "transform": "{content}", "transform_each": 1}}},
    "transform_each_without_transform": {"start_anchor": "a", "fields": {"t": {"open": "<t>", "transform_each": True}}},
    "join_without_repeats": {"start_anchor": "a", "fields": {"x": {"open": "<x>", "close": "</x>", "join": ""}}},
    "join_not_string": {"start_anchor": "a", "fields": {"x": {"open": "<x>", "repeats": True, "join": 7}}},
    "missing_start_anchor": {"fields": {"c": {}}},
    "start_anchor_both": {"start_anchor": "a", "start_anchor_pattern": "a", "fields": {"c": {}}},
    "start_anchor_empty": {"start_anchor": "", "fields": {"c": {}}},
    "invalid_start_anchor_pattern": {"start_anchor_pattern": "(?P<x", "fields": {"c": {}}},
}


def run_case(parse_response, template, prefix, output, tools):
    try:
        result = parse_response(output, copy.deepcopy(template), prefix=prefix, tools=copy.deepcopy(tools))
        json.dumps(result, allow_nan=False)
        return {"expected": result}
    except Exception as e:  # noqa: BLE001 - every exception is a golden outcome
        return {"expected_error": {"type": type(e).__name__, "message": str(e)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--hf-source", default=None)
    args = parser.parse_args()
    parse_response, generated_by = load_parse_response(args.hf_source)
    os.makedirs(args.outdir, exist_ok=True)
    total = 0
    for name, (template, cases) in CASES.items():
        doc = {"generated_by": generated_by, "name": name, "template": template, "cases": []}
        for case_name, prefix, output, tools in cases:
            case = {"name": case_name, "prefix": prefix, "output": output, "tools": tools}
            case.update(run_case(parse_response, template, prefix, output, tools))
            doc["cases"].append(case)
            total += 1
        with open(os.path.join(args.outdir, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
    errors = {"generated_by": generated_by, "cases": []}
    for name, template in SCHEMA_ERRORS.items():
        outcome = run_case(parse_response, template, "", "", None)
        if "expected" in outcome:
            sys.exit(f"schema case {name} was accepted by transformers")
        errors["cases"].append({"name": name, "template": template, **outcome})
    with open(os.path.join(args.outdir, "schema_errors.json"), "w", encoding="utf-8") as f:
        json.dump(errors, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{generated_by}: {len(CASES)} templates, {total} cases, {len(SCHEMA_ERRORS)} schema errors -> {args.outdir}")


if __name__ == "__main__":
    main()
