// The chat-template engine, construct by construct. Exact outputs here were checked against jinja2
// (tests/python/test_chat_template.py compares whole model templates with jinja2 itself).
#include "veloxquant/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.h"
#include "veloxquant/gguf.h"

namespace veloxquant {
namespace {

const char* const kMessages =
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
    R"( {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}])";

std::string render(const std::string& source, const std::string& extra = "", bool generation_prompt = true) {
  ChatTemplateOptions options;
  options.add_generation_prompt = generation_prompt;
  options.extra_context_json = extra;
  return ChatTemplate::parse(source, "<s>", "</s>").render(kMessages, options);
}

std::string render_error(const std::string& source) {
  return test::error_message<ChatTemplateError>([&] { render(source); });
}

TEST(ChatTemplate, TextAndOutput) {
  EXPECT_EQ(render("plain"), "plain");
  EXPECT_EQ(render("a\n"), "a");  // one trailing newline dropped, as jinja2 does
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("{{ bos_token }}x{{ eos_token }}"), "<s>x</s>");
  EXPECT_EQ(render("{{ add_generation_prompt }}", "", false), "False");
  EXPECT_EQ(render("a{# comment #}b"), "ab");
}

TEST(ChatTemplate, WhitespaceControl) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");  // trim_blocks
  EXPECT_EQ(render("  {% if true %}\n    x\n  {% endif %}\n"), "    x\n");    // lstrip_blocks
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(render("{% if true +%}\nkept{% endif %}"), "\nkept");
  EXPECT_EQ(render("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
  EXPECT_EQ(render("{% raw %}{{ a }}{% endraw %}"), "{{ a }}");
}

TEST(ChatTemplate, NumbersPrintAsPython) {
  EXPECT_EQ(render("{{ 1 }} {{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ -0.0 }}"),
            "1 1.0 1e+16 1e-05 0.30000000000000004 2.5 -0.0");
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}"),
            "-4 2 -2 1024 0.5");
  EXPECT_EQ(render("{{ 123456789012345.6 }} {{ 1.5e300 }} {{ 0.0001 }}"),
            "123456789012345.6 1.5e+300 0.0001");
}

TEST(ChatTemplate, LiteralsPrintAsPythonRepr) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}"), "[1, 'a', None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(render("{{ (1,) }}{{ () }}{{ ['it\\'s', 'a\"b'] }}"), "(1,)()[\"it's\", 'a\"b']");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ '\\u00e9\\t' }}"), "ab\xC3\xA9\t");
}

TEST(ChatTemplate, Operators) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 - 4 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }}"),
            "3 a1None abab [1, 2]");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'b' in 'abc' }} {{ 1 not in [2] }}"),
            "True True True True True");
  EXPECT_EQ(render("{{ true and 'x' }} {{ false or 'y' }} {{ not none }}"), "x y True");
  EXPECT_EQ(render("{{ 'a' if false }}|{{ 'a' if false else 'b' }}"), "|b");
  EXPECT_EQ(render("{{ -2 | abs }} {{ 'A' | lower ~ 'b' | upper }}"), "2 aB");  // filters bind tightest
}

TEST(ChatTemplate, ForLoops) {
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{% endfor %}"),
            "102TrueFalse2211FalseTrue2");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }}{% endfor %}"), "133353");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "b1a2");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for m in messages %}{{ m.role[0] }}{% endfor %}"), "suau");
}

TEST(ChatTemplate, ScopingFollowsJinja) {
  // A set inside a loop lasts one iteration; inside an if it reaches the enclosing scope.
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
            "120");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render(
                "{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}"
                "{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set s %} {{ 1 + 1 }} {% endset %}[{{ s }}]"), "[ 2 ]");
  EXPECT_EQ(render("{% with a = 1 %}{{ a }}{% endwith %}{{ a is defined }}"), "1False");
}

TEST(ChatTemplate, Macros) {
  EXPECT_EQ(render(
                "{% macro g(n, p='!') %}Hi {{ n }}{{ p }}{% endmacro %}{{ g('A') }} {{ g(p='?', n='B') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(render("{% macro c(n) %}{{ n }}{% if n %}{{ c(n - 1) }}{% endif %}{% endmacro %}{{ c(3) }}"),
            "3210");
  EXPECT_EQ(render("{% macro m() %}{{ later }}{% endmacro %}{% set later = 'L' %}{{ m() }}"), "L");
  EXPECT_EQ(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(render("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, k=2) }}"), "(1,){'k': 2}");
}

TEST(ChatTemplate, LookupsAndSlices) {
  EXPECT_EQ(render("{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[9] is defined }}"),
            "system 2+2? False");
  EXPECT_EQ(
      render("{{ 'h\xC3\xA9llo'[1:3] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][1:] }} {{ messages[1:] | length }}"),
      "\xC3\xA9l cba [2, 3] 3");
  EXPECT_EQ(render("{{ {'items': 1}.items() | list }}"), "[('items', 1)]");  // methods before keys
}

TEST(ChatTemplate, Filters) {
  EXPECT_EQ(render("{{ '  x ' | trim }}|{{ 'hello wORLD' | title }}|{{ 'hELLO' | capitalize }}|"
                   "{{ 'aXa' | replace('a', 'b') }}|{{ 'h\xC3\xA9' | length }}|{{ [3, 4] | last }}"),
            "x|Hello World|Hello|bXb|2|4");
  EXPECT_EQ(
      render(
          "{{ '4.7' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ 12 | string }} {{ 2.567 | round(2) }}"),
      "4 0 2.5 12 2.57");
  EXPECT_EQ(render("{{ nothing | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }}"),
            "d d None");
  EXPECT_EQ(render("{{ messages | map(attribute='role') | join(',') }}"), "system,user,assistant,user");
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"), "2");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('even') | list }} {{ ['a'] | map('upper') | list }}"),
            "[2, 4] ['A']");
  EXPECT_EQ(render("{{ {'b': 1, 'A': 2} | dictsort }} {{ ['b', 'A', 'c'] | sort }}"),
            "[('A', 2), ('b', 1)] ['A', 'b', 'c']");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2, first=true) }}"), "  a\n  b");
}

TEST(ChatTemplate, TojsonIsJsonDumpsWithoutAsciiEscaping) {
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1.0, none, 'Z\xC3\xBC\"']} | tojson }}"),
            "{\"b\": 1, \"a\": [1.0, null, \"Z\xC3\xBC\\\"\"]}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
  EXPECT_EQ(render("{{ '\xC3\xA9' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(render("{{ ' a '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ "
                   "'abc'.startswith('ab') }}"),
            "a|['a', 'b', '', 'c']|['a', 'b']|True");
  EXPECT_EQ(render("{{ 'a.b.c'.rsplit('.', 1) }} {{ '-'.join(['x', 'y']) }} {{ 'abcb'.find('b') }}"),
            "['a.b', 'c'] x-y 1");
  EXPECT_EQ(render("{{ 'x<|channel>y'.split('<|channel>')[0] }}"), "x");
}

TEST(ChatTemplate, Tests) {
  EXPECT_EQ(
      render(
          "{{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ 'a' is string }} "
          "{{ messages[0] is mapping }} {{ messages is sequence }} {{ x is undefined }} {{ none is none }}"),
      "True True True True True True True True");
  EXPECT_EQ(
      render(
          "{{ 3 is divisibleby 3 }} {{ 2 is not equalto 3 }} {{ true is boolean }} {{ range is callable }}"),
      "True True True True");
}

TEST(ChatTemplate, UndefinedBehavesAsJinjaDefault) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing ~ 'x' }}][{{ nothing | length }}][{{ not nothing }}]"
                   "[{% for x in nothing %}x{% endfor %}]"),
            "[][x][0][True][]");
  EXPECT_CONTAINS(render_error("{{ nothing.attr }}"), "'nothing' is undefined");
  EXPECT_CONTAINS(render_error("{{ messages[0].nope.x }}"), "has no attribute 'nope'");
  EXPECT_CONTAINS(render_error("{{ nothing + 1 }}"), "'nothing' is undefined");
}

TEST(ChatTemplate, ExtraContextAndTools) {
  EXPECT_EQ(render("{{ enable_thinking }} {{ tools }} {{ documents }}", R"({"enable_thinking": false})"),
            "False None None");
  ChatTemplateOptions options;
  options.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
  EXPECT_EQ(ChatTemplate::parse("{{ tools[0].function.name }}").render("[]", options), "f");
}

TEST(ChatTemplate, RaiseExceptionIsItsOwnError) {
  const std::string source = "{% for m in messages %}{% if m.role == 'assistant' %}\n\n"
                             "{{ raise_exception('no assistants here') }}{% endif %}{% endfor %}";
  try {
    render(source);
    FAIL() << "expected ChatTemplateRaised";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_EQ(e.message(), "no assistants here");
    EXPECT_CONTAINS(std::string(e.what()), "line 3");
  }
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  const auto parse_error = [](const std::string& source) {
    return test::error_message<ChatTemplateError>([&] { ChatTemplate::parse(source); });
  };
  EXPECT_CONTAINS(parse_error("a\n{% if x %}\nb"), "expected 'elif' or 'else' or 'endif'");
  EXPECT_CONTAINS(parse_error("a\n\n{{ x | frobnicate }}"), "line 3: no filter named 'frobnicate'");
  EXPECT_CONTAINS(parse_error("{{ x is frobnicated }}"), "no test named 'frobnicated'");
  EXPECT_CONTAINS(parse_error("{% include 'x' %}"), "'{% include %}' is not supported");
  EXPECT_CONTAINS(parse_error("{% for x in y recursive %}{% endfor %}"), "recursive");
  EXPECT_CONTAINS(parse_error("{% endfor %}"), "unknown tag 'endfor'");
  EXPECT_CONTAINS(parse_error("{{ 'open"), "unterminated string");
  EXPECT_CONTAINS(parse_error("{# open"), "missing end of comment");
  EXPECT_CONTAINS(parse_error("{{ 1 + }}"), "expected an expression");
  EXPECT_CONTAINS(parse_error("{% break %}"), "outside a for loop");
}

TEST(ChatTemplate, RuntimeErrorsNameTheProblem) {
  EXPECT_CONTAINS(render_error("{{ 'a' + 1 }}"), "can only concatenate str");
  EXPECT_CONTAINS(render_error("x\n{{ 1 / 0 }}"), "line 2: division by zero");
  EXPECT_CONTAINS(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
                  "takes not more than 1 argument");
  EXPECT_CONTAINS(render_error("{{ [] | tojson }}{{ nothing | tojson }}"), "not JSON serializable");
  EXPECT_CONTAINS(render_error("{% set d = {} %}{% set d.x = 1 %}"), "non-namespace");
  EXPECT_CONTAINS(render_error("{{ [].append(1) }}"), "not supported");
  EXPECT_CONTAINS(render_error("{{ 1 < 'a' }}"), "not supported between");
  EXPECT_CONTAINS(render_error("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  EXPECT_THROW(ChatTemplate::parse("x").render("{not json"), Error);
  EXPECT_THROW(ChatTemplate::parse("x").render(R"({"role": "user"})"), Error);
}

TEST(ChatTemplate, HostileTemplatesFailInsteadOfRunningAway) {
  EXPECT_CONTAINS(render_error("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"), "nested deeper than");
  EXPECT_CONTAINS(render_error(
                      "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}"),
                  "iterations");
  EXPECT_CONTAINS(render_error("{{ 'x' * 100000000 }}"), "output limit");
  EXPECT_CONTAINS(render_error(
                      "{% set ns = namespace(v=[]) %}{% for i in range(300) %}{% set ns.v = [ns.v] %}"
                      "{% endfor %}"),
                  "nested 257 deep");
  EXPECT_CONTAINS(render_error("{% set ns = namespace() %}{% set ns.me = ns %}"),
                  "namespace inside a namespace");
  // Quadratic string building and size blow-ups stop at a bound instead of exhausting time or memory.
  EXPECT_CONTAINS(
      render_error("{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                   "{% set ns.s = ns.s ~ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}"
                   "{% endfor %}"),
      "concatenation copied more than");
  EXPECT_CONTAINS(render_error("{{ ('x' * 1000000).replace('', 'y' * 1000) }}"), "MiB limit");
  const std::string deep = std::string(500, '(') + "1" + std::string(500, ')');
  EXPECT_CONTAINS(test::error_message<ChatTemplateError>([&] { ChatTemplate::parse("{{ " + deep + " }}"); }),
                  "nesting deeper than");
}

TEST(ChatTemplate, FromGgufReadsTemplateAndSpecialTokens) {
  GgufWriter w;
  w.add_metadata("tokenizer.ggml.tokens",
                 GgufValue::array_of(std::vector<std::string>{"<unk>", "<bos>", "<eos>", "hi"}));
  w.add_metadata("tokenizer.ggml.bos_token_id", GgufValue(uint32_t{1}));
  w.add_metadata("tokenizer.ggml.eos_token_id", GgufValue(uint32_t{2}));
  w.add_metadata("tokenizer.chat_template",
                 GgufValue("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"));
  w.add_metadata("tokenizer.chat_template.tool_use", GgufValue("tools:{{ tools | length }}"));
  const GgufFile file = GgufFile::parse(w.to_bytes());
  const ChatTemplate chat = ChatTemplate::from_gguf(file);
  EXPECT_EQ(chat.bos_token(), "<bos>");
  EXPECT_EQ(chat.eos_token(), "<eos>");
  EXPECT_EQ(chat.render(R"([{"role": "user", "content": "x"}])"), "<bos>x<eos>");
  ChatTemplateOptions options;
  options.tools_json = "[1, 2]";
  EXPECT_EQ(ChatTemplate::from_gguf(file, "tool_use").render("[]", options), "tools:2");
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { ChatTemplate::from_gguf(file, "rag"); }),
                  "tokenizer.chat_template.rag");
}

TEST(ChatTemplate, CopiesShareOneParsedTemplate) {
  const ChatTemplate a = ChatTemplate::parse("{{ messages | length }}");
  const ChatTemplate b = a;  // NOLINT(performance-unnecessary-copy-initialization): copying is the point
  EXPECT_EQ(a.render(kMessages), b.render(kMessages));
  EXPECT_EQ(&a.source(), &b.source());
}

}  // namespace
}  // namespace veloxquant
