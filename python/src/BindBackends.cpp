// Bindings of schedules (JSON in and out, validation, explain, loop nests,
// default schedules), targets, JIT kernels on numpy arrays, timing, and the
// static-library generator.
#include <pybind11/stl.h>

#include "Bindings.h"
#include "Buffers.h"
#include "backends/Generator.h"
#include "backends/Jit.h"
#include "backends/Timing.h"
#include "schedules/Explain.h"
#include "schedules/FullSpeed.h"
#include "schedules/LoopNest.h"
#include "schedules/Partition.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"

namespace pto::py {

namespace py = pybind11;

namespace {

Schedule parse(const std::string& json) { return schedule_from_json_string(json); }
std::string dump(const Schedule& s) { return schedule_to_json_string(s, -1); }

py::dict target_dict(const Target& t) {
  py::dict d;
  d["name"] = t.name;
  d["halide"] = t.halide;
  d["arch"] = t.arch;
  d["device"] = t.device;
  d["cores"] = t.cores;
  d["vector_bits"] = t.vector_bits;
  d["vector_registers"] = t.vector_registers;
  d["avx512_bf16"] = t.avx512_bf16;
  d["amx"] = t.amx;
  d["l1_bytes"] = t.l1_bytes;
  d["l2_bytes"] = t.l2_bytes;
  d["l3_bytes"] = t.l3_bytes;
  d["cache_line_bytes"] = t.cache_line_bytes;
  d["detected"] = t.detected;
  d["runs_here"] = t.runs_here();
  return d;
}

// Buffers for one call: views of the inputs, and outputs either given (checked
// writable) or allocated. The py::arrays keep the memory alive across the call.
struct CallBuffers {
  std::vector<py::array> keep;
  std::vector<BufferRef> inputs, outputs;
  py::list out_arrays;
};

CallBuffers prepare(const Kernel& k, const std::vector<py::object>& args, const py::object& out) {
  const Program& p = k.program();
  const auto& ins = p.inputs();
  if (args.size() != ins.size()) {
    std::string names;
    for (const auto& t : ins) names += (names.empty() ? "" : ", ") + t.name;
    throw ShapeError("program '" + p.name() + "' takes " + std::to_string(ins.size()) + " arrays (" + names +
                     "), got " + std::to_string(args.size()));
  }
  CallBuffers cb;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string what = "argument '" + ins[i].name + "'";
    if (!py::isinstance<py::array>(args[i]))
      throw DTypeError(what + " must be a numpy array, got " + py::str(py::type::of(args[i]).attr("__name__")).cast<std::string>());
    py::array a = py::reinterpret_borrow<py::array>(args[i]);
    BufferRef b = view(a, what);
    if (b.dtype != ins[i].dtype)
      throw DTypeError(what + " has dtype " + std::string(to_string(b.dtype)) + ", the kernel was built for " +
                       std::string(to_string(ins[i].dtype)));
    shapes.push_back(b.shape);
    cb.inputs.push_back(std::move(b));
    cb.keep.push_back(a);
  }
  const auto out_shapes = k.output_shapes(shapes);
  const auto out_names = p.outputs();
  std::vector<py::object> given;
  if (!out.is_none()) {
    for (const py::handle h : py::reinterpret_borrow<py::sequence>(out)) given.push_back(py::reinterpret_borrow<py::object>(h));
    if (given.size() != out_names.size())
      throw ShapeError("out: program '" + p.name() + "' has " + std::to_string(out_names.size()) + " outputs, got " +
                       std::to_string(given.size()) + " arrays");
  }
  for (size_t i = 0; i < out_names.size(); ++i) {
    const DType t = p.stage(out_names[i]).dtype;
    py::array a;
    if (given.empty()) {
      a = empty_array(t, out_shapes[i]);
    } else {
      const std::string what = "out '" + out_names[i] + "'";
      if (!py::isinstance<py::array>(given[i])) throw DTypeError(what + " must be a numpy array");
      a = py::reinterpret_borrow<py::array>(given[i]);
      if (!a.writeable()) throw ShapeError(what + " is read-only");
    }
    cb.outputs.push_back(view(a, "out '" + out_names[i] + "'"));
    cb.out_arrays.append(a);
    cb.keep.push_back(a);
  }
  return cb;
}

py::dict stats_dict(const RunStats& s) {
  py::dict d;
  d["peak_bytes"] = s.peak_bytes;
  d["allocations"] = s.allocations;
  d["shards"] = s.shards;
  return d;
}

}  // namespace

void bind_schedules(py::module_& m) {
  m.def("normalize_schedule", [](const std::string& json) { return dump(parse(json)); },
        "Parses schedule JSON strictly and prints it back; raises ScheduleError naming the bad key.");
  m.def("default_schedule", [](const Program& p, const std::string& target) {
    return dump(default_schedule(p, parse_target(target)));
  }, py::arg("program"), py::arg("target") = "host");
  m.def("plain_schedule", [](const Program& p) { return dump(plain_schedule(p)); });
  m.def(
      "partition",
      [](const Program& p, const std::string& json, const std::string& target, int max_stages,
         const std::set<std::string>& constants) {
        py::list l;
        for (Part& part :
             partition(p, parse(json), parse_target(target), {max_stages, constants})) {
          py::dict d;
          d["program"] = part.program;
          d["schedule"] = dump(part.schedule);
          d["inputs"] = part.inputs;
          d["outputs"] = part.outputs;
          d["at_load"] = part.at_load;
          l.append(d);
        }
        return l;
      },
      py::arg("program"), py::arg("schedule"), py::arg("target") = "host",
      py::arg("max_stages") = PartitionOptions{}.max_stages,
      py::arg("constants") = std::set<std::string>{},
      "The program and schedule cut into parts that compile as separate kernels "
      "(schedules/Partition.h): dicts of program, schedule, inputs and outputs (names in the whole "
      "program) and at_load (the part computed from `constants` alone, run once at load), in run "
      "order.");
  m.def("full_speed_extents", [](const Program& p, const std::string& json) {
    return full_speed_extents(p, parse(json));
  }, py::arg("program"), py::arg("schedule"),
     "Per size symbol, the least value at which every stage runs its unguarded loops (schedules/FullSpeed.h).");
  m.def("validate", [](const Program& p, const std::string& json, const std::string& target) {
    const Target t = parse_target(target);
    validate(p, parse(json), &t);
  }, py::arg("program"), py::arg("schedule"), py::arg("target") = "host");
  m.def("explain", [](const Program& p, const std::string& json, const std::string& target) {
    const Target t = parse_target(target);
    return explain(p, parse(json), &t);
  }, py::arg("program"), py::arg("schedule"), py::arg("target") = "host");
  m.def("loop_nest", [](const Program& p, const std::string& stage, const std::string& json, bool update) {
    const Schedule s = parse(json);
    const StageSchedule* ss = s.find(stage);
    LoopSchedule ls;
    if (ss) ls = update ? ss->update.value_or(LoopSchedule{}) : ss->loops;
    py::list l;
    for (const Loop& lp : loop_nest(p.stage(stage), ls, update)) {
      py::dict d;
      d["name"] = lp.name;
      d["dim"] = lp.dim;
      d["reduction"] = lp.reduction;
      d["extent"] = lp.extent < 0 ? py::object(py::none()) : py::object(py::int_(lp.extent));
      d["extent_str"] = lp.extent_str;
      l.append(d);
    }
    return l;
  }, py::arg("program"), py::arg("stage"), py::arg("schedule"), py::arg("update") = false,
     "The loops of a stage (pure or update definition) under a schedule, outermost first.");
}

void bind_backends(py::module_& m) {
  m.def("target", [](const std::string& name) { return target_dict(parse_target(name)); }, py::arg("name") = "host");
  m.def("known_targets", &known_target_names);

  py::class_<Kernel>(m, "Kernel", "A Program compiled (JIT) under a schedule for a target.")
      .def(py::init([](const Program& p, const std::string& schedule, const std::string& target) {
             const Schedule s = parse(schedule);
             const Target t = parse_target(target);
             py::gil_scoped_release nogil;  // compiling takes 0.2-1 s; let other threads run
             return std::make_unique<Kernel>(p, s, t);
           }),
           py::arg("program"), py::arg("schedule"), py::arg("target") = "host")
      .def_property_readonly("program", &Kernel::program)
      .def_property_readonly("schedule", [](const Kernel& k) { return dump(k.schedule()); })
      .def_property_readonly("target", [](const Kernel& k) { return target_dict(k.target()); })
      .def("output_shapes", &Kernel::output_shapes)
      .def(
          "run",
          [](const Kernel& k, const std::vector<py::object>& args, const py::object& out,
             size_t memory_limit, bool shard) {
            CallBuffers cb = prepare(k, args, out);
            RunStats st;
            {
              py::gil_scoped_release nogil;
              st = k.run(cb.inputs, cb.outputs, memory_limit,
                         shard ? OnRefusal::Shard : OnRefusal::Fail);
            }
            return py::make_tuple(cb.out_arrays, stats_dict(st));
          },
          py::arg("args"), py::arg("out") = py::none(), py::arg("memory_limit") = 0,
          py::arg("shard") = false,
          "Runs on numpy arrays (inputs in Program.inputs() order); returns (outputs, stats). Over "
          "`memory_limit` bytes of intermediates: DeviceMemoryError, or with `shard` a run split "
          "along "
          "the program's batch axis (stats['shards']).")
      .def(
          "time",
          [](const Kernel& k, const std::vector<py::object>& args, int warmup, int min_reps,
             double min_seconds, int max_reps) {
            CallBuffers cb = prepare(k, args, py::none());
            TimingStats t;
            {
              py::gil_scoped_release nogil;
              t = time_it([&] { k.run(cb.inputs, cb.outputs); }, warmup, min_reps, min_seconds,
                          max_reps);
            }
            py::dict d;
            d["median_ms"] = t.median_ms;
            d["min_ms"] = t.min_ms;
            d["max_ms"] = t.max_ms;
            d["reps"] = t.reps;
            return d;
          },
          py::arg("args"), py::arg("warmup") = 1, py::arg("min_reps") = 5,
          py::arg("min_seconds") = 0.2, py::arg("max_reps") = 1000,
          "Median / min / max wall time of run() in ms (timing loop in C++).");

  m.def("generate_library", [](const Program& p, const std::string& schedule, const std::string& target,
                               const std::string& out_dir, const std::string& name) {
    const Schedule s = parse(schedule);
    const Target t = parse_target(target);
    GeneratedLibrary g;
    {
      py::gil_scoped_release nogil;
      g = generate_library(p, s, t, out_dir, name);
    }
    py::dict d;
    d["library"] = g.library;
    d["halide_header"] = g.halide_headers.empty() ? std::string() : g.halide_headers.front();
    d["header"] = g.header;
    return d;
  }, py::arg("program"), py::arg("schedule"), py::arg("target"), py::arg("out_dir"), py::arg("name"));
}

}  // namespace pto::py
