// Bindings of the troubleshooting tools (debug/): `_pto.bisect` runs
// debug/Bisect.h on numpy arrays (`k.bisect(*arrays)` in pypto), and
// `_pto.locate_nonfinite` debug/CheckNumerics.h (`pypto.check_numerics()`),
// `_pto.profile_stages` debug/StageProfile.h (`k.profile_stages(*arrays)`).
#include <pybind11/stl.h>

#include "Bindings.h"
#include "Buffers.h"
#include "debug/Bisect.h"
#include "debug/CheckNumerics.h"
#include "debug/StageProfile.h"
#include "schedules/ScheduleJson.h"
#include "target/Target.h"

namespace pto::py {

namespace py = pybind11;

namespace {

py::dict bisect_dict(const debug::BisectResult& r) {
  py::dict d;
  d["program"] = r.program;
  d["tolerance"] = r.tolerance;
  d["error_given"] = r.error_given;
  d["error_plain"] = r.error_plain;
  d["stage"] = r.stage;
  d["group"] = r.group;
  d["error_before"] = r.error_before;
  d["error_after"] = r.error_after;
  py::list fields;
  for (const debug::BisectField& f : r.fields) {
    py::dict fd;
    fd["field"] = f.field;
    fd["directive"] = f.directive;
    fd["error_without"] = f.error_without;
    fd["error_alone"] = f.error_alone;
    fd["culprit"] = f.culprit(r.tolerance);
    fields.append(fd);
  }
  d["fields"] = fields;
  d["compiles"] = r.compiles;
  d["verdict"] = r.verdict;
  d["report"] = r.report();
  return d;
}

// Views of the arrays a tool runs `p` on, one per input (ShapeError naming
// `tool` otherwise).
std::vector<BufferRef> input_views(const char* tool, const Program& p,
                                   const std::vector<py::array>& args) {
  if (args.size() != p.inputs().size())
    throw ShapeError(std::string(tool) + ": program '" + p.name() + "' takes " +
                     std::to_string(p.inputs().size()) + " arrays, got " +
                     std::to_string(args.size()));
  std::vector<BufferRef> ins;
  for (size_t i = 0; i < args.size(); ++i)
    ins.push_back(view(args[i], "argument '" + p.inputs()[i].name + "'"));
  return ins;
}

}  // namespace

void bind_debug(py::module_& m) {
  m.def(
      "locate_nonfinite",
      [](const Program& p, const std::string& schedule, const std::string& target,
         const std::vector<py::array>& args) {
        const Target t = parse_target(target);
        const Schedule s = schedule_from_json_string(schedule);
        std::vector<BufferRef> ins;
        for (size_t i = 0; i < args.size() && i < p.inputs().size(); ++i)
          ins.push_back(view(args[i], "argument '" + p.inputs()[i].name + "'"));
        debug::NonFinite r;
        {
          py::gil_scoped_release nogil;
          r = debug::locate_nonfinite(p, s, t, ins);
        }
        py::dict d;
        d["found"] = r.found;
        d["tensor"] = r.tensor;
        d["is_input"] = r.is_input;
        d["op"] = r.op;
        d["kind"] = r.kind;
        d["value"] = r.value;
        d["index"] = r.index;
        d["reads"] = r.reads;
        d["step"] = r.step;
        d["message"] = r.message();
        return d;
      },
      py::arg("program"), py::arg("schedule"), py::arg("target"), py::arg("arrays"),
      "The first stage (or input) holding NaN or Inf, where, and what it read there "
      "(debug/CheckNumerics.h).");
  m.def(
      "bisect",
      [](const Program& p, const std::string& schedule, const std::string& target,
         const std::vector<py::array>& args, double tolerance) {
        const Target t = parse_target(target);
        const Schedule s = schedule_from_json_string(schedule);
        const std::vector<BufferRef> ins = input_views("bisect", p, args);
        std::vector<std::vector<int64_t>> shapes;
        for (const BufferRef& b : ins) shapes.push_back(b.shape);
        const auto out_shapes = output_shapes(p, shapes);
        std::vector<py::array> keep;
        std::vector<BufferRef> outs;
        for (size_t i = 0; i < out_shapes.size(); ++i) {
          keep.push_back(empty_array(p.stage(p.outputs()[i]).dtype, out_shapes[i]));
          outs.push_back(view(keep.back(), "output"));
        }
        debug::BisectOptions o;
        o.tolerance = tolerance;
        debug::BisectResult r;
        {
          py::gil_scoped_release nogil;
          r = debug::bisect(p, s, t, ins, outs, o);
        }
        return bisect_dict(r);
      },
      py::arg("program"), py::arg("schedule"), py::arg("target"), py::arg("arrays"),
      py::arg("tolerance") = 0.0,
      "The stage, then the schedule field, that takes the output past the tolerance "
      "(debug/Bisect.h).");
  m.def(
      "profile_stages",
      [](const Program& p, const std::string& schedule, const std::string& target,
         const std::vector<py::array>& args, double min_seconds) {
        const Target t = parse_target(target);
        const Schedule s = schedule_from_json_string(schedule);
        const std::vector<BufferRef> ins = input_views("profile_stages", p, args);
        debug::StageProfile r;
        {
          py::gil_scoped_release nogil;
          r = debug::profile_stages(p, s, t, ins, min_seconds);
        }
        py::list rows;
        for (const debug::StageTime& st : r.stages) {
          py::dict d;
          d["stage"] = st.stage;
          d["op"] = st.op;
          d["placement"] = st.placement;
          d["ms"] = st.ms;
          d["share"] = st.share;
          d["productions"] = st.productions;
          d["buffer_bytes"] = st.buffer_bytes;
          rows.append(d);
        }
        py::dict d;
        d["program"] = r.program;
        d["stages"] = rows;
        d["run_ms"] = r.run_ms;
        d["runs"] = r.runs;
        d["peak_bytes"] = r.peak_bytes;
        d["report"] = r.report();
        return d;
      },
      py::arg("program"), py::arg("schedule"), py::arg("target"), py::arg("arrays"),
      py::arg("min_seconds") = 0.2,
      "Per-stage wall time of the root stages (traced productions), placements, production "
      "counts and buffer sizes (debug/StageProfile.h).");
}

}  // namespace pto::py
