#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "veloxquant/error.h"
#include "veloxquant/method.h"
#include "veloxquant/spec.h"

namespace veloxquant {
namespace {

using Args = std::vector<std::pair<std::string, std::string>>;

std::vector<ParamDef> defs() {
  return {ParamDef::integer("bits", 2, 1, 8, "bits per code"),
          ParamDef::real("ratio", 0.5, 0, 1, "a fraction"),
          ParamDef::boolean("sink", true, "keep the sink token"),
          ParamDef::choice("mode", {"mse", "fp16"}, "mse", "how to store")};
}

// The SpecError message of `f`, or "" (and a test failure) when it does not throw one.
template <typename F>
std::string spec_error(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected SpecError";
  return "";
}

std::string resolve_error(const Args& args) {
  return spec_error([&] { resolve_params("m", defs(), args); });
}

TEST(Spec, RawParsesNameAndArgsIgnoringWhitespace) {
  const RawSpec r = parse_raw_spec("  kivi :  kbits = 2 ,vbits=4\t");
  EXPECT_EQ(r.method, "kivi");
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[0], (std::pair<std::string, std::string>{"kbits", "2"}));
  EXPECT_EQ(r.args[1], (std::pair<std::string, std::string>{"vbits", "4"}));
  const RawSpec bare = parse_raw_spec("fp16");
  EXPECT_EQ(bare.method, "fp16");
  EXPECT_TRUE(bare.args.empty());
  EXPECT_EQ(parse_raw_spec(" fp16 ").method, "fp16");
}

TEST(Spec, RawSyntaxErrors) {
  for (const char* bad : {"", "   ", ":a=1", " : a=1", "m:a", "m:a=1,b", "m:a=1,", "m:", "m: ",
                          "m:=1", "m:a=", "m:a=1,,b=2", "m:,a=1", "m: = "}) {
    EXPECT_THROW(parse_raw_spec(bad), SpecError) << "'" << bad << "'";
  }
  const std::string msg = spec_error([] { parse_raw_spec("kivi:kbits"); });
  EXPECT_NE(msg.find("kbits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("name=value"), std::string::npos) << msg;
  const std::string empty_name = spec_error([] { parse_raw_spec(":kbits=2"); });
  EXPECT_NE(empty_name.find("method"), std::string::npos) << empty_name;
}

TEST(Spec, ResolveFillsDefaults) {
  const Params p = resolve_params("m", defs(), {});
  EXPECT_EQ(p.get_int("bits"), 2);
  EXPECT_EQ(p.get_float("ratio"), 0.5);
  EXPECT_TRUE(p.get_bool("sink"));
  EXPECT_EQ(p.get_choice("mode"), "mse");
  const Params q = resolve_params("m", defs(), {{"ratio", "0.25"}, {"bits", "8"}});
  EXPECT_EQ(q.get_int("bits"), 8);
  EXPECT_EQ(q.get_float("ratio"), 0.25);
  EXPECT_TRUE(q.get_bool("sink"));
  EXPECT_EQ(q.get_choice("mode"), "mse");
}

TEST(Spec, ResolveAcceptsRangeEndpoints) {
  EXPECT_EQ(resolve_params("m", defs(), {{"bits", "1"}}).get_int("bits"), 1);
  EXPECT_EQ(resolve_params("m", defs(), {{"bits", "8"}}).get_int("bits"), 8);
  EXPECT_EQ(resolve_params("m", defs(), {{"ratio", "0"}}).get_float("ratio"), 0.0);
  EXPECT_EQ(resolve_params("m", defs(), {{"ratio", "1"}}).get_float("ratio"), 1.0);
  EXPECT_EQ(resolve_params("m", defs(), {{"ratio", "1e-1"}}).get_float("ratio"), 0.1);
  const std::vector<ParamDef> neg = {ParamDef::integer("shift", 0, -5, 5, "")};
  EXPECT_EQ(resolve_params("m", neg, {{"shift", "-5"}}).get_int("shift"), -5);
  EXPECT_THROW(resolve_params("m", neg, {{"shift", "-6"}}), SpecError);
}

TEST(Spec, UnknownParameterListsAllowedNames) {
  const std::string msg = resolve_error({{"foo", "1"}});
  EXPECT_NE(msg.find("'foo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bits, ratio, sink, mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("m:"), std::string::npos) << msg;  // names the method
  const std::string none = spec_error([] { resolve_params("fp16", {}, {{"x", "1"}}); });
  EXPECT_NE(none.find("'x'"), std::string::npos) << none;
  EXPECT_NE(none.find("(none)"), std::string::npos) << none;
}

TEST(Spec, OutOfRangeNamesParameterAndRange) {
  for (const char* v : {"0", "9", "-1", "100"}) {
    const std::string msg = resolve_error({{"bits", v}});
    EXPECT_NE(msg.find("bits=" + std::string(v)), std::string::npos) << msg;
    EXPECT_NE(msg.find("1..8"), std::string::npos) << msg;
  }
  for (const char* v : {"1.5", "-0.1", "1.0000001"}) {
    const std::string msg = resolve_error({{"ratio", v}});
    EXPECT_NE(msg.find("ratio"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0..1"), std::string::npos) << msg;
  }
}

TEST(Spec, NonNumericValuesRejected) {
  for (const char* v : {"2.5", "abc", "2x", "", "1e1", "0x4", "99999999999999999999999"}) {
    const std::string msg = resolve_error({{"bits", v}});
    EXPECT_NE(msg.find("bits"), std::string::npos) << msg;
    EXPECT_NE(msg.find("integer"), std::string::npos) << "'" << v << "': " << msg;
  }
  for (const char* v : {"nan", "inf", "-inf", "x", "0.5.1", ""}) {
    const std::string msg = resolve_error({{"ratio", v}});
    EXPECT_NE(msg.find("ratio"), std::string::npos) << msg;
  }
}

TEST(Spec, BooleanParsing) {
  EXPECT_TRUE(resolve_params("m", defs(), {{"sink", "true"}}).get_bool("sink"));
  EXPECT_TRUE(resolve_params("m", defs(), {{"sink", "1"}}).get_bool("sink"));
  EXPECT_FALSE(resolve_params("m", defs(), {{"sink", "false"}}).get_bool("sink"));
  EXPECT_FALSE(resolve_params("m", defs(), {{"sink", "0"}}).get_bool("sink"));
  for (const char* v : {"yes", "TRUE", "2", "on", ""}) {
    const std::string msg = resolve_error({{"sink", v}});
    EXPECT_NE(msg.find("sink"), std::string::npos) << msg;
    EXPECT_NE(msg.find("true or false"), std::string::npos) << msg;
  }
}

TEST(Spec, ChoiceErrorsListChoices) {
  EXPECT_EQ(resolve_params("m", defs(), {{"mode", "fp16"}}).get_choice("mode"), "fp16");
  for (const char* v : {"fp32", "MSE", ""}) {
    const std::string msg = resolve_error({{"mode", v}});
    EXPECT_NE(msg.find("mode"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mse, fp16"), std::string::npos) << msg;
  }
}

TEST(Spec, DuplicateParameterRejected) {
  const std::string msg = resolve_error({{"bits", "2"}, {"bits", "3"}});
  EXPECT_NE(msg.find("bits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  // Even with the same value.
  EXPECT_THROW(resolve_params("m", defs(), {{"sink", "1"}, {"sink", "1"}}), SpecError);
}

TEST(Spec, GettersThrowOnMissingNames) {
  const Params p = resolve_params("m", defs(), {});
  EXPECT_THROW(p.get_int("nope"), SpecError);
  EXPECT_THROW(p.get_float("nope"), SpecError);
  EXPECT_THROW(p.get_bool("nope"), SpecError);
  EXPECT_THROW(p.get_choice("bits"), SpecError);
}

TEST(Spec, DescribeAndDefaults) {
  const auto d = defs();
  EXPECT_EQ(d[0].describe(), "2 (1..8)");
  EXPECT_EQ(d[1].describe(), "0.5 (0..1)");
  EXPECT_EQ(d[2].describe(), "true (true|false)");
  EXPECT_EQ(d[3].describe(), "mse (mse|fp16)");
  EXPECT_EQ(d[0].format_default(), "2");
  EXPECT_EQ(d[3].format_default(), "mse");
}

TEST(Spec, FormatIsCanonicalAndRoundTrips) {
  const auto d = defs();
  const Params dflt = resolve_params("m", d, {});
  EXPECT_EQ(format_spec("m", d, dflt), "m:bits=2,ratio=0.5,sink=true,mode=mse");
  EXPECT_EQ(format_spec("fp16", {}, Params{}), "fp16");

  const std::vector<ParamDef> reals = {ParamDef::real("x", 0, -1e9, 1e9, "")};
  for (double v : {0.1, 0.2, 0.30000000000000004, 1.0 / 3.0, 1e-7, 2.5e-300, -0.7, 123456.789,
                   0.0, 1e9}) {
    Params p;
    p.numbers["x"] = v;
    const std::string text = format_spec("m", reals, p);
    const RawSpec raw = parse_raw_spec(text);
    EXPECT_EQ(raw.method, "m");
    const Params back = resolve_params(raw.method, reals, raw.args);
    EXPECT_EQ(back, p) << text;
    EXPECT_EQ(back.get_float("x"), v) << text;  // bit-exact
  }
  EXPECT_EQ(format_spec("m", reals, resolve_params("m", reals, {{"x", "0.1"}})), "m:x=0.1");

  for (const Args& args : {Args{}, Args{{"bits", "7"}, {"ratio", "0.1"}, {"sink", "false"}, {"mode", "fp16"}},
                           Args{{"mode", "fp16"}, {"bits", "1"}}, Args{{"ratio", "0.333"}}}) {
    const Params p = resolve_params("m", d, args);
    const std::string text = format_spec("m", d, p);
    const RawSpec raw = parse_raw_spec(text);
    EXPECT_EQ(resolve_params(raw.method, d, raw.args), p) << text;
    // Formatting is canonical: the text of the re-parsed params is identical.
    EXPECT_EQ(format_spec("m", d, resolve_params(raw.method, d, raw.args)), text);
  }
  EXPECT_EQ(format_spec("m", d, resolve_params("m", d, {{"mode", "fp16"}, {"bits", "1"}})),
            "m:bits=1,ratio=0.5,sink=true,mode=fp16");
}

// Integers with trailing zeros are written in digits ("1e+06" would not parse as an integer).
TEST(Spec, LargeIntegersRoundTrip) {
  const Spec s = parse_spec("kivi:residual=1000000");
  EXPECT_NE(s.to_string().find("residual=1000000"), std::string::npos) << s.to_string();
  EXPECT_EQ(parse_spec(s.to_string()), s);
  EXPECT_EQ(ParamDef::integer("n", 2000000, 0, 100000000, "").describe(), "2000000 (0..100000000)");
}

TEST(Spec, ParseFp16) {
  const Spec s = parse_spec("fp16");
  ASSERT_NE(s.method, nullptr);
  EXPECT_EQ(s.method->name, "fp16");
  EXPECT_EQ(s.to_string(), "fp16");
  EXPECT_EQ(parse_spec("  fp16 "), s);
  EXPECT_EQ(&find_method("fp16"), s.method);
  const std::string msg = spec_error([] { parse_spec("fp16:x=1"); });
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  EXPECT_THROW(parse_spec("fp16:"), SpecError);
  EXPECT_THROW(parse_spec("FP16"), SpecError);
  EXPECT_THROW(Spec{}.to_string(), SpecError);
}

TEST(Spec, UnknownMethodListsRegisteredNames) {
  for (const char* bad : {"nope", "nope:a=1", "fp1"}) {
    const std::string msg = spec_error([&] { parse_spec(bad); });
    EXPECT_NE(msg.find("unknown method"), std::string::npos) << msg;
    for (const auto* list : {&registered_methods(), &registered_policies()}) {
      for (const auto& m : *list) EXPECT_NE(msg.find(m.name), std::string::npos) << m.name << " missing from: " << msg;
    }
  }
  EXPECT_THROW(find_method(""), SpecError);
  EXPECT_THROW(find_policy("kivi"), SpecError);
}

TEST(Spec, EveryRegisteredMethodRoundTripsAtDefaults) {
  ASSERT_FALSE(registered_methods().empty());
  for (const auto& m : registered_methods()) {
    const Spec s = parse_spec(m.name);
    EXPECT_EQ(s.method, &m);
    const std::string text = s.to_string();
    EXPECT_EQ(parse_spec(text), s) << text;
    EXPECT_EQ(parse_spec(text).to_string(), text);
    for (const auto& p : m.params) {
      // An empty text parameter (artifacts=) is left out: "name=" would not parse back.
      if (p.type == ParamType::Text) continue;
      EXPECT_NE(text.find(p.name + "="), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace veloxquant
