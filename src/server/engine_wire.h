// What the ranks of a server running across an MPI job (engine.h, Engine::run_across_ranks) send
// each other: jobs, their reply updates and the slots' state, as MessagePack (nlohmann-json), which
// carries a token's bytes as they are (a token's text may be part of a UTF-8 character).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "src/server/engine.h"

namespace latte::server {

nlohmann::json to_wire(const EngineJob& job);
nlohmann::json to_wire(const ReplyUpdate& update);
nlohmann::json to_wire(const SlotInfo& slot);
// Throw ggl::Error for a message that is not one.
EngineJob job_from_wire(const nlohmann::json& j);
ReplyUpdate update_from_wire(const nlohmann::json& j);
SlotInfo slot_from_wire(const nlohmann::json& j);

std::string pack(const nlohmann::json& j);
nlohmann::json unpack(const std::string& bytes);

}  // namespace latte::server
