#include "src/chat/chat_persistence.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ggml-like/core/error.h"
#include "src/runtime/cache_io.h"

namespace latte {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "latte-chat";
constexpr int kVersion = 1;

json model_identity(const Session& s) {
  return {{"architecture", s.model().hparams().arch_name}, {"file_bytes", s.model().file().file_size()}};
}

std::string cache_path_for(const std::string& path) { return path + ".cache"; }

// The cached tokens that still begin the conversation (after /system they may not).
int64_t savable_cache_tokens(const ChatSession& chat, const std::vector<int32_t>& all) {
  const std::vector<int32_t>& cached = chat.cached_tokens();
  const size_t n = std::min(cached.size(), all.size());
  return std::mismatch(cached.begin(), cached.begin() + static_cast<std::ptrdiff_t>(n), all.begin()).first -
         cached.begin();
}

std::vector<Message> parse_messages(const json& doc, const std::string& path, int64_t n_vocab, bool keep_tokens) {
  const json& list = doc.at("messages");
  if (!list.is_array()) ggl::fail("{}: \"messages\" must be an array", path);
  std::vector<Message> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    const std::optional<Role> role = parse_role(m.at("role").get<std::string>());
    if (!role) ggl::fail("{}: message {} has the unknown role '{}'", path, i, m.at("role").get<std::string>());
    if (*role == Role::kSystem && i != 0) ggl::fail("{}: message {}: a system prompt must come first", path, i);
    Message msg{*role, m.at("content").get<std::string>(), {}};
    if (keep_tokens && m.contains("tokens")) {
      msg.tokens = m.at("tokens").get<std::vector<int32_t>>();
      for (int32_t t : msg.tokens)
        if (t < 0 || t >= n_vocab)
          ggl::fail("{}: message {} has token {} outside the vocabulary of {} tokens", path, i, t, n_vocab);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// One key per line and one message per line: readable, and diffable, without putting every token
// id on a line of its own. Built by appending piece by piece: `"literal" + std::string&&` inserts
// at the front of the temporary, which GCC 12 misreports as an overlapping memcpy (-Wrestrict,
// GCC bug 105651).
std::string layout(const json& doc) {
  std::string text = "{\n";
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    text += " ";
    text += json(it.key()).dump();
    text += ": ";
    if (it.key() == "messages") {
      text += "[\n";
      for (size_t i = 0; i < it->size(); ++i) {
        text += "  ";
        text += (*it)[i].dump();
        text += i + 1 < it->size() ? ",\n" : "\n";
      }
      text += " ]";
    } else {
      text += it->dump();
    }
    text += std::next(it) != doc.end() ? ",\n" : "\n";
  }
  return text + "}\n";
}

}  // namespace

SaveReport save_chat(const ChatSession& chat, const std::string& path) {
  const Conversation& conv = chat.conversation();
  const std::vector<int32_t> all = conv.tokens();
  SaveReport report;
  report.messages = conv.messages().size();
  report.tokens = static_cast<int64_t>(all.size());
  report.cache_tokens = savable_cache_tokens(chat, all);

  json doc = {{"format", kFormat},
              {"version", kVersion},
              {"template", std::string(conv.chat_template().name())},
              {"model", model_identity(chat.session())}};
  json& messages = doc["messages"] = json::array();
  for (const Message& m : conv.messages())
    messages.push_back({{"role", std::string(role_name(m.role))}, {"content", m.content}, {"tokens", m.tokens}});
  doc["cache"] = nullptr;
  if (report.cache_tokens > 0) {
    report.cache_path = cache_path_for(path);
    report.cache_bytes =
        save_cache(chat.session(), std::span(all).first(static_cast<size_t>(report.cache_tokens)), report.cache_path);
    report.row_bytes = report.cache_bytes - kCacheFileHeaderBytes;
    doc["cache"] = {{"file", fs::path(report.cache_path).filename().string()}, {"tokens", report.cache_tokens}};
  }

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << layout(doc);
    if (!out.flush()) {
      std::remove(tmp.c_str());
      ggl::fail("{}: cannot write the conversation", path);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) ggl::fail("{}: cannot write the conversation: {}", path, ec.message());
  return report;
}

LoadReport load_chat(ChatSession& chat, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ggl::fail("{}: cannot open the conversation file", path);
  json doc;
  std::vector<Message> messages;
  LoadReport report;
  std::string cache_file;
  int64_t cache_tokens = 0;
  try {
    doc = json::parse(in);
    if (!doc.is_object() || doc.value("format", "") != kFormat) ggl::fail("{}: not a latte conversation file", path);
    if (doc.at("version").get<int>() != kVersion)
      ggl::fail("{}: conversation file version {} (this latte reads version {})", path, doc.at("version").get<int>(),
                kVersion);
    // Token ids only mean something to the model they were made with; for another one the
    // messages are tokenized again.
    const bool same_model = doc.contains("model") && doc.at("model") == model_identity(chat.session());
    if (!same_model) report.note = "saved with another model: the messages are tokenized again";
    messages = parse_messages(doc, path, chat.session().n_vocab(), same_model);
    const std::string saved_template = doc.value("template", "");
    const std::string_view current = chat.conversation().chat_template().name();
    if (saved_template != current)
      report.note += (report.note.empty() ? "" : "; ") +
                     fmt::format("saved with template '{}', continuing with '{}'", saved_template, current);
    if (same_model && doc.contains("cache") && doc.at("cache").is_object()) {
      cache_file = (fs::path(path).parent_path() / doc.at("cache").at("file").get<std::string>()).string();
      cache_tokens = doc.at("cache").at("tokens").get<int64_t>();
    }
  } catch (const json::exception& e) {
    ggl::fail("{}: malformed conversation file: {}", path, e.what());
  }

  chat.replace_conversation(std::move(messages));
  const std::vector<int32_t> all = chat.conversation().tokens();
  report.messages = chat.conversation().messages().size();
  report.tokens = static_cast<int64_t>(all.size());
  if (cache_tokens > 0) {
    try {
      if (cache_tokens > report.tokens)
        ggl::fail("{}: the cache holds {} tokens, the conversation only {}", cache_file, cache_tokens, report.tokens);
      report.cache_bytes =
          load_cache(chat.session(), std::span(all).first(static_cast<size_t>(cache_tokens)), cache_file);
      chat.adopt_cache(cache_tokens);
      report.cache_tokens = cache_tokens;
    } catch (const ggl::Error& e) {
      report.note +=
          (report.note.empty() ? "" : "; ") + std::string(e.what()) + " (the conversation is evaluated again)";
    }
  }
  return report;
}

}  // namespace latte
