// --override-kv KEY=TYPE:VALUE (src/model/metadata_override.h): the model loads with the value
// given, in the type the file stores the key in, and malformed or mismatched overrides are errors
// naming the key.
#include <gtest/gtest.h>

#include <string>

#include "ggml-like/core/error.h"
#include "src/model/metadata_override.h"
#include "src/model/model.h"
#include "tests/support/test_support.h"

namespace test_metadata_override {

using latte::MetadataOverride;
using latte::parse_metadata_override;

std::string default_model() {
  return (latte::testing::latte_binary().parent_path() / "../../models/tiny-mla-stories-f32.gguf").string();
}

std::string error_of(const std::vector<std::string>& specs) {
  try {
    latte::ModelOptions o;
    for (const std::string& s : specs) o.overrides.push_back(parse_metadata_override(s));
    latte::Model model(default_model(), o);
  } catch (const ggl::Error& e) {
    return e.what();
  }
  return "";
}

TEST(MetadataOverride, ParsesKeyTypeAndValue) {
  const MetadataOverride o = parse_metadata_override("deepseek2.expert_group_count=int:1");
  EXPECT_EQ(o.key, "deepseek2.expert_group_count");
  EXPECT_EQ(o.type, "int");
  EXPECT_EQ(o.value, "1");
  EXPECT_EQ(parse_metadata_override("general.name=str:a=b:c").value, "a=b:c");
}

TEST(MetadataOverride, ModelLoadsWithTheValueInTheFilesType) {
  latte::ModelOptions o;
  for (const char* s : {"deepseek2.rope.freq_base=float:5000", "deepseek2.expert_used_count=int:1",
                        "general.name=str:renamed", "latte.test.flag=bool:true"})
    o.overrides.push_back(parse_metadata_override(s));
  const latte::Model model(default_model(), o);
  EXPECT_EQ(model.hparams().rope.freq_base, 5000.0f);
  EXPECT_EQ(model.hparams().moe.n_expert_used, 1);
  const ggl::Metadata& md = model.file().metadata();
  EXPECT_EQ(md.get<std::string>("general.name"), "renamed");
  EXPECT_TRUE(md.get<bool>("latte.test.flag"));
  EXPECT_EQ(md.find("deepseek2.expert_used_count")->type(), ggl::ValueType::U32);  // the file's type kept
  // Without overrides, the file's values.
  const latte::Model plain(default_model());
  EXPECT_EQ(plain.hparams().rope.freq_base, 10000.0f);
  EXPECT_EQ(plain.hparams().moe.n_expert_used, 2);
}

TEST(MetadataOverride, BadOverridesAreErrorsNamingTheKey) {
  struct Case {
    std::string spec, expected;
  };
  for (const Case& c : {Case{"foo", "expected KEY=TYPE:VALUE"}, Case{"=int:1", "expected KEY=TYPE:VALUE"},
                        Case{"a=int", "expected KEY=TYPE:VALUE"}, Case{"a=u32:1", "type 'u32' is not int"},
                        Case{"deepseek2.expert_used_count=int:x", "'x' is not an integer"},
                        Case{"deepseek2.expert_used_count=int:-1", "-1 does not fit the file's u32"},
                        Case{"deepseek2.expert_used_count=str:2", "the file's value is u32, not a string"},
                        Case{"deepseek2.rope.freq_base=float:fast", "'fast' is not a number"},
                        Case{"general.name=int:3", "the file's value is string, not an integer"},
                        Case{"x.flag=bool:yes", "'yes' is not true or false"}}) {
    const std::string e = error_of({c.spec});
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.spec << " -> " << e;
  }
}

}  // namespace test_metadata_override
