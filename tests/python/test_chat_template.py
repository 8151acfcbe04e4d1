"""The chat-template engine (include/veloxquant/chat_template.h) against jinja2, configured as Hugging
Face transformers configures it for apply_chat_template: an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, raise_exception and strftime_now as globals
and tojson as json.dumps(ensure_ascii=False) keeping key order.

Two corpora, each rendered by both and compared byte for byte:
- every chat template in llama.cpp's vocabulary files (.cache/llama-vocab, which scripts/setup.sh
  extracts) and in the shared models, each with a set of conversations (system prompts, several
  turns, unicode, tools and tool calls, content parts, with and without the generation prompt);
- small templates exercising one construct each (filters, tests, operators, scoping, whitespace).
Where jinja2 raises (e.g. the template's raise_exception on roles that do not alternate), the engine
must fail too: its tool exits 3 for raise_exception and 2 for any other error."""

from __future__ import annotations

import json
import mmap
import os
import struct
import subprocess
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest

ROOT = Path(__file__).resolve().parents[2]
VOCAB_DIR = ROOT / ".cache" / "llama-vocab"
TEMPLATE_KEY = "tokenizer.chat_template"


# ---- the oracle --------------------------------------------------------------------------------


class TemplateRaised(Exception):
    """raise_exception() was called by the template."""


def _raise_exception(message):
    raise TemplateRaised(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


ENV = _environment()


def jinja_render(source: str, case: Case, bos: str, eos: str) -> tuple[str, str | None]:
    """(text, None) or ("", "raised") / ("", "error") as transformers would see it."""
    context = {
        "messages": case.messages,
        "tools": case.tools,
        "documents": None,
        "add_generation_prompt": case.add_generation_prompt,
        "bos_token": bos,
        "eos_token": eos,
    }
    context.update(case.extra)
    try:
        return ENV.from_string(source).render(**context), None
    except TemplateRaised:
        return "", "raised"
    except Exception:  # noqa: BLE001 - any jinja2 failure must be a failure of ours too
        return "", "error"


# ---- our engine --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def render_tool() -> str:
    value = os.environ.get("VELOXQUANT_RENDER_CHAT")
    if not value or not Path(value).exists():
        pytest.fail(
            f"VELOXQUANT_RENDER_CHAT={value!r} is not the built veloxquant_render_chat (CTest sets it)"
        )
    return value


def ours_render(tool: str, tmp_path: Path, source: str, case: Case, bos: str, eos: str):
    template = tmp_path / "template.jinja"
    template.write_bytes(source.encode())
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps(case.messages, ensure_ascii=False), encoding="utf-8")
    command = [tool, "--template", str(template), "--messages", str(messages), "--bos", bos, "--eos", eos]
    if case.tools is not None:
        tools = tmp_path / "tools.json"
        tools.write_text(json.dumps(case.tools, ensure_ascii=False), encoding="utf-8")
        command += ["--tools", str(tools)]
    if case.extra:
        extra = tmp_path / "context.json"
        extra.write_text(json.dumps(case.extra, ensure_ascii=False), encoding="utf-8")
        command += ["--context", str(extra)]
    if not case.add_generation_prompt:
        command.append("--no-generation-prompt")
    result = subprocess.run(command, capture_output=True, timeout=60, check=False)
    return result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8", "replace")


def check_same(tool: str, tmp_path: Path, source: str, case: Case, bos: str = "<s>", eos: str = "</s>"):
    want, failure = jinja_render(source, case, bos, eos)
    code, got, stderr = ours_render(tool, tmp_path, source, case, bos, eos)
    if failure == "raised":
        assert code == 3, f"jinja2's template raised; ours exited {code} with {got!r} {stderr}"
    elif failure == "error":
        assert code == 2, f"jinja2 failed; ours exited {code} with {got!r} {stderr}"
        assert stderr.startswith("veloxquant_render_chat: error: chat template"), stderr
    else:
        assert code == 0, stderr
        assert got == want
    return failure


# ---- conversations -----------------------------------------------------------------------------


class Case:
    def __init__(self, name, messages, tools=None, extra=None, add_generation_prompt=True):
        self.name = name
        self.messages = messages
        self.tools = tools
        self.extra = extra or {}
        self.add_generation_prompt = add_generation_prompt


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "nullable": True},
                "days": {"type": "integer", "description": "Forecast days"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat"],
                },
            },
            "required": ["city"],
        },
    },
}
COMMAND_R_TOOL = {
    "name": "internet_search",
    "description": "Returns a list of relevant document snippets for a textual query.",
    "parameter_definitions": {
        "query": {"description": "Query to search the internet with", "type": "str", "required": True},
        "limit": {"description": "How many results", "type": "int", "required": False},
    },
}
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2, "flag": True, "x": 1.5}},
}
TRICKY = (
    "Quotes ' and \" and a back\\slash,\nnew lines\n\n\ttabs, ünïcödé 日本語 🙂 and {{ braces }} {% tags %}"
)

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
USER = {"role": "user", "content": "Hello there!"}
ASSISTANT = {"role": "assistant", "content": "Hi. How can I help?"}
USER2 = {"role": "user", "content": "What is 2 + 2?"}


def conversations() -> list[Case]:
    base = [
        Case("user", [USER]),
        Case("system_user", [SYSTEM, USER]),
        Case("multi_turn", [SYSTEM, USER, ASSISTANT, USER2]),
        Case("multi_turn_no_system", [USER, ASSISTANT, USER2]),
        Case("assistant_last", [USER, ASSISTANT]),
        Case(
            "tricky_text",
            [{"role": "system", "content": "  " + TRICKY + "  "}, {"role": "user", "content": TRICKY}],
        ),
        Case("spaces_around", [{"role": "user", "content": "\n  padded \u3000\n"}]),
        Case("bad_order", [USER, USER2]),
        Case("assistant_first", [ASSISTANT, USER]),
        Case("empty", []),
        Case(
            "thinking_answer",
            [USER, {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>Four."}, USER2],
        ),
        Case(
            "content_parts",
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look: "},
                        {"type": "image"},
                        {"type": "text", "text": "ok"},
                    ],
                }
            ],
        ),
        Case("tools", [SYSTEM, USER], tools=[WEATHER_TOOL]),
        Case(
            "tool_call",
            [
                USER,
                {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                {
                    "role": "tool",
                    "content": "",
                    "tool_responses": [{"name": "get_weather", "response": {"temp": 21.5, "sky": "clear"}}],
                },
            ],
            tools=[WEATHER_TOOL],
        ),
        Case(
            "tool_call_string_arguments",
            [
                USER,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}],
                },
                {
                    "role": "tool",
                    "content": "",
                    "tool_responses": [{"name": "get_weather", "response": "sunny"}],
                },
            ],
        ),
        Case("thinking_on", [SYSTEM, USER], extra={"enable_thinking": True}),
        Case("thinking_off", [USER], extra={"enable_thinking": False}),
        Case("command_r_tools", [USER], tools=[COMMAND_R_TOOL]),
        Case(
            "documents",
            [USER],
            extra={"documents": [{"title": "Tall penguins", "text": "Emperor penguins are the tallest."}]},
        ),
    ]
    cases = []
    for case in base:
        for prompt in (True, False):
            c = Case(case.name, case.messages, case.tools, case.extra, prompt)
            c.name = f"{case.name}-{'gen' if prompt else 'nogen'}"
            cases.append(c)
    return cases


CASES = conversations()
DOCUMENTS = [
    {"title": "Tall penguins", "text": "Emperor penguins are the tallest."},
    {"title": "x", "text": "ü"},
]


def adapted(case: Case, template_name: str | None) -> Case:
    """command-r's named templates iterate `tools` (tool_use) or `documents` (rag) unconditionally, so
    every conversation brings them."""
    if template_name == "tool_use" and case.tools is None:
        return Case(case.name, case.messages, [COMMAND_R_TOOL], case.extra, case.add_generation_prompt)
    if template_name == "rag" and "documents" not in case.extra:
        extra = {**case.extra, "documents": DOCUMENTS}
        return Case(case.name, case.messages, case.tools, extra, case.add_generation_prompt)
    return case


# ---- the template corpus -----------------------------------------------------------------------


_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


def read_metadata(path: Path) -> dict:
    """A GGUF file's metadata: scalars, strings and arrays (of strings as str). gguf's GGUFReader gives
    the same, but builds a numpy array per token and takes seconds per vocabulary; this reads only the
    header."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    magic, version, _, kv_count = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF" and version in (2, 3), path
    pos = 24

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        return data[pos - n : pos].decode("utf-8", "replace")

    def value(kind):
        nonlocal pos
        if kind == 8:
            return string()
        if kind == 9:
            element, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if element in _SCALARS and element != 8:
                size = struct.calcsize(_SCALARS[element])
                items = [v[0] for v in struct.iter_unpack(_SCALARS[element], data[pos : pos + size * count])]
                pos += size * count
                return items
            return [value(element) for _ in range(count)]
        (v,) = struct.unpack_from(_SCALARS[kind], data, pos)
        pos += struct.calcsize(_SCALARS[kind])
        return v

    metadata = {}
    for _ in range(kv_count):
        key = string()
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        metadata[key] = value(kind)
    return metadata


def _token_text(metadata: dict, key: str) -> str:
    index, tokens = metadata.get(key), metadata.get("tokenizer.ggml.tokens", [])
    return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else ""


def template_corpus() -> list[tuple[str, Path, str | None, str, str, str]]:
    """(id, gguf path, template name or None, template, bos text, eos text) for every chat template."""
    paths = sorted(VOCAB_DIR.glob("*.gguf"))
    shared = Path(os.environ.get("VELOXQUANT_SHARED_DIR", ROOT.parent / "shared")) / "models"
    paths += sorted(shared.glob("*.gguf"))
    corpus = []
    for path in paths:
        metadata = read_metadata(path)
        bos = _token_text(metadata, "tokenizer.ggml.bos_token_id")
        eos = _token_text(metadata, "tokenizer.ggml.eos_token_id")
        for key, source in metadata.items():
            if key == TEMPLATE_KEY or (key.startswith(TEMPLATE_KEY + ".") and isinstance(source, str)):
                name = None if key == TEMPLATE_KEY else key[len(TEMPLATE_KEY) + 1 :]
                corpus.append((f"{path.stem}{'.' + name if name else ''}", path, name, source, bos, eos))
    return corpus


CORPUS = template_corpus() if VOCAB_DIR.is_dir() else []


def test_corpus_is_present():
    if not VOCAB_DIR.is_dir():
        pytest.skip(f"{VOCAB_DIR} is missing: run scripts/setup.sh to extract llama.cpp's vocabularies")
    assert len(CORPUS) >= 5, [c[0] for c in CORPUS]


@pytest.mark.parametrize("entry", CORPUS, ids=[c[0] for c in CORPUS])
def test_model_templates_match_jinja2(render_tool, tmp_path, entry):
    _, _, name, source, bos, eos = entry
    outcomes = {}
    for case in CASES:
        outcomes[case.name] = (
            check_same(render_tool, tmp_path, source, adapted(case, name), bos, eos) or "rendered"
        )
    # Most conversations must render: a template that fails on everything would test little.
    assert list(outcomes.values()).count("rendered") >= len(CASES) // 2, outcomes


PLAIN = [c for c in CORPUS if c[2] is None][:1]


@pytest.mark.parametrize("entry", PLAIN, ids=[c[0] for c in PLAIN])
def test_gguf_input_reads_template_and_tokens(render_tool, tmp_path, entry):
    """--gguf takes the template and the BOS/EOS texts from the file itself."""
    _, path, name, source, bos, eos = entry
    case = CASES[2]
    want, failure = jinja_render(source, case, bos, eos)
    assert failure is None
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps(case.messages), encoding="utf-8")
    command = [render_tool, "--gguf", str(path), "--messages", str(messages)]
    if name:
        command += ["--name", name]
    result = subprocess.run(command, capture_output=True, timeout=60, check=True)
    assert result.stdout.decode() == want


# ---- constructs --------------------------------------------------------------------------------

# Each renders with the messages below and the variables of CONSTRUCT_CONTEXT.
CONSTRUCTS = {
    "text_only": "plain text\n",
    "trailing_newlines": "a\n\n",
    "crlf": "a\r\nb\rc{% if true %}\r\nd{% endif %}\r\n",
    "comment": "a {# note #} b\n  {# own line #}\nc {#- strip -#}   d",
    "trim_blocks": "{% if true %}\nyes\n{% endif %}\nafter",
    "lstrip_blocks": "  {% if true %}\n    x\n  {% endif %}\n  {{ 'v' }}\n",
    "whitespace_markers": "a  {{- ' b ' -}}  c\n  {%- if true +%}\n d {%+ endif %}",
    "plus_keeps_newline": "{% if true +%}\nkept\n{% endif %}",
    "raw": "{% raw %}{{ not evaluated }} {% if %}{% endraw %}!",
    "raw_stripped": "a  {%- raw -%}  x {{ y }}  {%- endraw -%}  b\n  {% raw %}\n  r\n  {% endraw %}\nend",
    "lstrip_comments_and_lines": (
        "x\n    {# c #}\n  \t{% set a = 1 %}\n  {{ a }}\n  {%- if true %}\n  y {% endif %}  \n z"
    ),
    "dash_then_lstrip": (
        "{%- for i in [1, 2] -%}\n    {% if i %}{{ i }}{% endif %}\n{%- endfor %}\n  {% if 1 %}k{% endif %}"
    ),
    "unicode_whitespace": "a\u3000{{- 'b' -}}\xa0 c {{ ' \u2003x\u2003 ' | trim }}|{{ 'a\u3000b'.split() }}",
    "nested_loops_and_loop_vars": (
        "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ "
        "loop.index }}{{ b }}{% endfor %}{% endfor %}"
    ),
    "string_escapes": "{{ '\\x41 \\101 \\\\ é' }} {{ \"tab\\there\" }}",
    "numbers": (
        "{{ 1 }} {{ -3 }} {{ 1.0 }} {{ 2.5e3 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} "
        "{{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ "
        "1_000 }}"
    ),
    "literals": (
        "{{ [1, 'a', none, true, false, 1.5, [2], {'k': 'v'}] }} {{ (1,) }} {{ () }} {{ {} }} {{ "
        "None }}{{ True }}{{ 'it\\'s' }}{{ \"say \\\"hi\\\"\" }} {{ 'a' 'b' }} {{ "
        "'\\u00e9\\x41\\n' }}"
    ),
    "repr_strings": "{{ ['it\\'s', 'a\"b', 'both\\'\"', 'tab\\tnew\\nline', '\\u00a0', 'ünï'] }}",
    "concat_and_math": (
        "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' * 3 }} {{ [1] + [2] }} {{ 3 * [0] }} {{ 1 + 2 * 3 - 4 }}"
    ),
    "comparisons": (
        "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ "
        "'a' != 'a' }} {{ 2 >= 2 }} {{ none == none }} {{ 'b' in 'abc' }} {{ 1 not in [2] }} {{ "
        "'k' in {'k': 1} }}"
    ),
    "logic": (
        "{{ true and 'x' }} {{ false or 'y' }} {{ 0 or '' }} {{ not none }} {{ not [] }} {{ 'a' if "
        "false }}|{{ 'a' if true else 'b' }} {{ 1 if 0 else 2 if 0 else 3 }}"
    ),
    "if_elif_else": (
        "{% for n in [1, 2, 3, 4] %}{% if n == 1 %}one{% elif n == 2 %}two{% elif n > 3 %}big{% "
        "else %}other{% endif %},{% endfor %}"
    ),
    "for_loop_vars": (
        "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
        "}}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem "
        "}}{{ loop.cycle('o', 'e') }};{% endfor %}"
    ),
    "for_else_and_filter": (
        "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in range(10) if x is odd %}{{ x "
        "}}{{ loop.length }} {% endfor %}"
    ),
    "for_dict": (
        "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %} {% for k, v in {'b': 1, 'a': "
        "2}.items() %}{{ k }}={{ v }} {% endfor %}{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ "
        "k }}={{ v }} {% endfor %}"
    ),
    "for_nested_and_controls": (
        "{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{% if j "
        "== 1 %}{% continue %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}"
    ),
    "set_scoping": (
        "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}{% if "
        "true %}{% set y = 5 %}{% endif %}{{ y }}{% set a, b = 1, 2 %}{{ a }}{{ b }}"
    ),
    "namespace": (
        "{% set ns = namespace(total=0, names=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = "
        "ns.total + i %}{% set ns.names = ns.names + [i | string] %}{% endfor %}{{ ns.total }} {{ "
        "ns.names | join('-') }} {{ ns.missing is defined }}"
    ),
    "set_block": (
        "{% set block %}  inner {{ 1 + 1 }} {% endset %}[{{ block }}]{% set up | upper | trim %} "
        "shout {% endset %}[{{ up }}]"
    ),
    "macros": (
        "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') "
        "}} {{ greet('Bo', punct='?') }} {{ greet(punct='.', name='Cy') }} {{ greet() }}"
    ),
    "macro_recursion_and_varargs": (
        "{% macro count(n) %}{{ n }}{% if n > 0 %},{{ count(n - 1) }}{% endif %}{% endmacro %}{{ "
        "count(3) }} {% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}"
    ),
    "macro_sees_later_globals": "{% macro m() %}{{ later }}{% endmacro %}{% set later = 'L' %}{{ m() }}",
    "call_block": (
        "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('t') %}body "
        "{{ 1 }}{% endcall %}{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% "
        "endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}"
    ),
    "filter_block_and_with": (
        "{% filter upper %}abc {{ 'd' }}{% endfilter %} {% with a = 1, b = 2 %}{{ a + b }}{% "
        "endwith %}{{ a is defined }}"
    ),
    "attribute_and_subscript": (
        "{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages[-1].role }} {{ "
        "messages[5] is defined }} {{ messages[0].nope is defined }} {{ data.nested.list.1 }} {{ "
        "data['nested']['n'] }}"
    ),
    "slices": (
        "{{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][:-1] }} {{ "
        "[1, 2, 3, 4][::2] }} {{ [1, 2, 3, 4][-2:] }} {{ messages[1:] | length }} {{ 'abc'[-1] }} "
        "{{ 'abc'[5:] }}|"
    ),
    "string_filters": (
        "{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'aBc' | upper }}{{ 'aBc' | lower }} {{ "
        "'hello wORLD-foo (bar)' | title }} {{ 'hELLO world' | capitalize }} {{ 'a-b-a' | "
        "replace('a', 'z') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'éß' | upper }} {{ 'ÀÉ' | "
        "lower }} {{ '<a&\"' | escape }}"
    ),
    "length_first_last": (
        "{{ 'héllo' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ [3, 4] | first }} "
        "{{ [3, 4] | last }} {{ 'abc' | first }} {{ [] | first }}|{{ undefined_thing | length }}"
    ),
    "conversions": (
        "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ "
        "'2.5' | float }} {{ 3 | float }} {{ 'nan' | float }} {{ 'y' | float }} {{ 12 | string }} "
        "{{ [1] | string }} {{ none | string }} {{ true | int }} {{ -2.5 | abs }} {{ 2.567 | "
        "round(2) }} {{ 2.5 | round }} {{ 3 | round }} {{ 2.1 | round(0, 'ceil') }}"
    ),
    "default_filter": (
        "{{ undefined_thing | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) "
        "}} {{ 0 | d('z', boolean=true) }} {{ 'set' | default('d') }}"
    ),
    "list_filters": (
        "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A'] | "
        "sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 1, 3] | "
        "unique | list }} {{ 'abc' | reverse }} {{ [1, 2] | reverse | list }} {{ [1, 2, 3] | sum "
        "}} {{ [4, 2, 8] | min }} {{ [4, 2, 8] | max }} {{ {'b': 1} | list }} {{ 'ab' | list }} {{ "
        "[1, 2] | join(', ') }} {{ [1, 2] | join }}"
    ),
    "map_select": (
        "{{ messages | map(attribute='role') | join(',') }} {{ ['a', 'b'] | map('upper') | list }} "
        "{{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ "
        "messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | "
        "rejectattr('role', 'eq', 'user') | map(attribute='content') | list }} {{ [0, 1, '', 'x'] "
        "| select | list }} {{ messages | map(attribute='missing', default='?') | list }} {{ "
        "messages | selectattr('role', 'in', ['system', 'user']) | list | length }}"
    ),
    "dict_filters_and_methods": (
        "{{ data | items | list }} {{ data.keys() | list }} {{ data.values() | list | length }} {{ "
        "data.get('n') }} {{ data.get('zz', 'dflt') }} {{ data.get('zz') }} {{ data | dictsort }} "
        "{{ {'b': 1, 'A': 2, 'a': 0} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value', "
        "reverse=true) }}"
    ),
    "tojson": (
        "{{ data | tojson }} {{ 'ü\"\\n' | tojson }} {{ [1.0, none, true, 1e100] | tojson }} {{ "
        "data | tojson(indent=2) }} {{ {'b': [], 'a': {}} | tojson(indent=4) }} {{ data | "
        "tojson(sort_keys=true) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ {'a': [1, 2]} | "
        "tojson(separators=(',', ':')) }} {{ {1: 2} | tojson }}"
    ),
    "string_methods": (
        "{{ ' a b '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') "
        "}} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a.b.c'.rsplit('.', 1) }} {{ "
        "'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }} "
        "{{ 'hello world'.title() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'abcb'.find('b') }} "
        "{{ 'abcb'.rfind('b') }} {{ 'abcb'.count('b') }} {{ '-'.join(['a', 'b']) }} {{ "
        "'12'.isdigit() }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }} {{ 'ab'.capitalize() }}"
    ),
    "tests": (
        "{{ 1 is number }} {{ true is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ 'a' is "
        "string }} {{ data is mapping }} {{ [1] is sequence }} {{ 'a' is iterable }} {{ none is "
        "none }} {{ x is undefined }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ "
        "3 is divisibleby 3 }} {{ 'a' is lower }} {{ 'A' is upper }} {{ 2 is eq 2 }} {{ 2 is not "
        "equalto 3 }} {{ 2 is gt 1 }} {{ 2 is in [2] }} {{ range is callable }} {{ data is sameas "
        "data }}"
    ),
    "range": (
        "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}"
    ),
    "undefined_behaviour": (
        "[{{ nothing }}][{{ nothing ~ 'x' }}][{{ nothing | upper }}][{{ nothing | list }}][{% for "
        "x in nothing %}{{ x }}{% endfor %}][{{ not nothing }}][{{ nothing == nothing }}][{{ 'a' "
        "in nothing }}]"
    ),
    "generation_variable": "{% if add_generation_prompt %}gen{% endif %}{{ bos_token }}{{ eos_token }}",
    "indent_filter": (
        "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, first=true) }}|{{ 'a\\n\\nb' | "
        "indent('> ', blank=true) }}"
    ),
    # Errors: jinja2 fails on each of these, so must we.
    "error_attribute_of_undefined": "{{ nothing.attr }}",
    "error_nested_undefined": "{{ messages[0].nope.deeper }}",
    "error_add_undefined": "{{ nothing + 1 }}",
    "error_str_plus_int": "{{ 'a' + 1 }}",
    "error_division_by_zero": "{{ 1 / 0 }}",
    "error_too_many_macro_args": "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "error_unknown_filter": "{{ 1 | no_such_filter }}",
    "error_unclosed_block": "{% if true %}open",
    "error_raise": "{{ raise_exception('custom failure') }}",
    "error_tojson_undefined": "{{ nothing | tojson }}",
    "error_set_attribute_on_dict": "{% set d = {} %}{% set d.x = 1 %}",
    "error_int_of_undefined": "{{ nothing | int }}",
    "error_compare_types": "{{ 1 < 'a' }}",
    "error_call_non_callable": "{{ 'a'() }}",
    "error_list_append": "{% set l = [] %}{{ l.append(1) }}",
    "error_include": "{% include 'other.html' %}",
}

CONSTRUCT_MESSAGES = [SYSTEM, USER, ASSISTANT, USER2]
CONSTRUCT_CONTEXT = {"data": {"n": 3, "name": "Zoë", "nested": {"list": [1, 2, 3], "n": None}, "f": 0.5}}


@pytest.mark.parametrize("name", list(CONSTRUCTS))
def test_constructs_match_jinja2(render_tool, tmp_path, name):
    case = Case(name, CONSTRUCT_MESSAGES, extra=CONSTRUCT_CONTEXT)
    failure = check_same(render_tool, tmp_path, CONSTRUCTS[name], case)
    assert (failure is not None) == name.startswith("error_"), f"{name}: jinja2 outcome {failure}"


def test_error_message_names_line(render_tool, tmp_path):
    case = Case("error", CONSTRUCT_MESSAGES)
    code, _, stderr = ours_render(
        render_tool, tmp_path, "line one\n{% if x %}\n{{ 1 | nope }}{% endif %}", case, "", ""
    )
    assert code == 2
    assert "line 3" in stderr and "nope" in stderr, stderr
