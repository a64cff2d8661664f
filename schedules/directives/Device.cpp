#include "schedules/directives/Device.h"

#include <algorithm>

#include "dsl/Error.h"
#include "schedules/LoopNest.h"
#include "schedules/directives/Json.h"

namespace pto::directives {
namespace {

void map_to_gpu(Halide::Stage hs, const StageSchedule& ss) {
  const Halide::DeviceAPI api =
      ss.device == "cuda" ? Halide::DeviceAPI::CUDA : Halide::DeviceAPI::OpenCL;
  auto v = [&](const std::vector<std::string>& n, size_t k) {
    return Halide::VarOrRVar(n[k], false);
  };
  const auto& b = ss.gpu.blocks;
  const auto& th = ss.gpu.threads;
  if (b.size() == 1) hs.gpu_blocks(v(b, 0), api);
  if (b.size() == 2) hs.gpu_blocks(v(b, 1), v(b, 0), api);
  if (b.size() == 3) hs.gpu_blocks(v(b, 2), v(b, 1), v(b, 0), api);
  if (th.size() == 1) hs.gpu_threads(v(th, 0), api);
  if (th.size() == 2) hs.gpu_threads(v(th, 1), v(th, 0), api);
  if (th.size() == 3) hs.gpu_threads(v(th, 2), v(th, 1), v(th, 0), api);
  if (th.empty() && b.empty()) hs.gpu_single_thread(api);
}

struct DeviceDirective : Directive {
  DeviceDirective() : Directive("device") {}
  std::vector<std::string_view> fields() const override { return {"device", "gpu"}; }

  void parse(const nlohmann::json& js, StageSchedule& ss, const std::string& path) const override {
    if (js.contains("device")) ss.device = json::get_string(js["device"], path + ".device");
    if (js.contains("gpu")) {
      const nlohmann::json& g = js["gpu"];
      json::check_keys(g, path + ".gpu", {"blocks", "threads"});
      if (g.contains("blocks")) ss.gpu.blocks = json::get_names(g["blocks"], path + ".gpu.blocks");
      if (g.contains("threads"))
        ss.gpu.threads = json::get_names(g["threads"], path + ".gpu.threads");
    }
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.device != "cpu") js["device"] = ss.device;
    if (!ss.gpu.blocks.empty() || !ss.gpu.threads.empty())
      js["gpu"] = {{"blocks", ss.gpu.blocks}, {"threads", ss.gpu.threads}};
  }

  void check(const CheckContext& c) const override {
    const StageSchedule& ss = c.ss;
    const std::string where = c.where();
    if (ss.device != "cpu" && ss.device != "cuda" && ss.device != "opencl")
      throw ScheduleError(where + ": unknown device '" + ss.device + "'; valid: cpu, cuda, opencl");
    if (ss.device != "cpu" && c.target && c.target->device != ss.device)
      throw ScheduleError(where + ": device '" + ss.device + "' is not part of target '" +
                          c.target->name + "'; use target host-" + ss.device);
    if ((!ss.gpu.blocks.empty() || !ss.gpu.threads.empty()) && ss.device == "cpu")
      throw ScheduleError(where + ": gpu blocks/threads need device cuda or opencl");
    if (ss.device != "cpu") {
      const auto loops = loop_nest(c.stage, ss.loops, false);
      for (const auto& n : ss.gpu.blocks)
        if (!find_loop(loops, n))
          throw ScheduleError(where + ": gpu block loop '" + n +
                              "' unknown; loops: " + join(loop_names(loops)));
      for (const auto& n : ss.gpu.threads)
        if (!find_loop(loops, n))
          throw ScheduleError(where + ": gpu thread loop '" + n +
                              "' unknown; loops: " + join(loop_names(loops)));
      if (ss.gpu.blocks.empty() && ss.gpu.threads.empty())
        throw ScheduleError(where + ": device '" + ss.device +
                            "' needs gpu.blocks and gpu.threads loops");
      if (ss.gpu.blocks.size() > 3 || ss.gpu.threads.size() > 3)
        throw ScheduleError(where + ": at most 3 gpu block and 3 gpu thread loops");
    }
  }

  void apply(ApplyContext& c) const override {
    const StageSchedule& ss = c.schedule();
    if (ss.device == "cpu") return;
    Halide::Func f = c.func();
    map_to_gpu(Halide::Stage(f), ss);
    // A reduction's update runs on the device too when its loops carry the
    // same GPU loop names (tile its pure dims like the pure definition);
    // otherwise Halide runs it on the host, copying the buffer across.
    if (c.update_in_func() && ss.update) {
      const auto nest = loop_nest(c.stage(), *ss.update, true);
      bool all = true;
      for (const auto* names : {&ss.gpu.blocks, &ss.gpu.threads})
        for (const auto& n : *names) all = all && find_loop(nest, n);
      if (all) map_to_gpu(f.update(0), ss);
    }
  }

  std::string explain_head(const StageSchedule& ss) const override {
    return ss.device != "cpu" ? ", device " + ss.device : "";
  }

 protected:
  // The target's device, its outer pure dim tiled over blocks of 16 threads.
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    StageSchedule cpu = c.ss;
    cpu.device = "cpu";
    cpu.gpu = {};
    r.push_back(cpu);
    if (!c.target || !c.target->has_device() || c.stage.vars.empty() ||
        c.ss.compute.kind == Placement::Kind::Inline)
      return r;
    const std::string& d = c.stage.vars.front();
    StageSchedule v = c.ss;
    v.device = c.target->device;
    v.loops.tile[d] = {16};
    v.gpu.blocks = {outer_loop(d)};
    v.gpu.threads = {inner_loop(d)};
    r.push_back(v);
    return r;
  }
};

}  // namespace

const Directive& device_directive() {
  return instance<DeviceDirective>();
}

}  // namespace pto::directives
