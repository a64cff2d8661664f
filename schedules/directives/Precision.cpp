#include "schedules/directives/Precision.h"

#include "dsl/Error.h"
#include "schedules/directives/Json.h"

namespace pto {

StagePrecision stage_precision(const Program& p, const Schedule& s, const std::string& name) {
  const Stage& st = p.stage(name);
  const StageSchedule* ss = s.find(name);
  const bool arg = st.is_arg_reduction();
  const DType value_type = arg ? st.value.type() : st.dtype;
  StagePrecision r{st.dtype, value_type, value_type};
  if (!ss || s.options.opt_level == 0) return r;
  if (ss->precision.storage) r.storage = *ss->precision.storage;
  if (ss->precision.compute) r.compute = *ss->precision.compute;
  r.accumulate = ss->precision.accumulate.value_or(st.reduce ? r.storage : r.compute);
  if (arg) r.storage = DType::I64;
  return r;
}

namespace directives {
namespace {

struct PrecisionDirective : Directive {
  PrecisionDirective() : Directive("precision") {}

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    const nlohmann::json& p = v;
    json::check_keys(p, path, {"storage", "compute", "accumulate"});
    if (p.contains("storage"))
      ss.precision.storage = json::get_dtype(p["storage"], path + ".precision.storage");
    if (p.contains("compute"))
      ss.precision.compute = json::get_dtype(p["compute"], path + ".precision.compute");
    if (p.contains("accumulate"))
      ss.precision.accumulate = json::get_dtype(p["accumulate"], path + ".precision.accumulate");
  }

  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    nlohmann::json prec = nlohmann::json::object();
    if (ss.precision.storage) prec["storage"] = to_string(*ss.precision.storage);
    if (ss.precision.compute) prec["compute"] = to_string(*ss.precision.compute);
    if (ss.precision.accumulate) prec["accumulate"] = to_string(*ss.precision.accumulate);
    if (!prec.empty()) js["precision"] = prec;
  }

  void check(const CheckContext& c) const override {
    const Stage& st = c.stage;
    const Precision& pr = c.ss.precision;
    for (const auto& [what, t] :
         {std::pair{"storage", pr.storage}, std::pair{"compute", pr.compute},
          std::pair{"accumulate", pr.accumulate}}) {
      if (t && !valid_precision_type(st.dtype, *t))
        throw ScheduleError(c.where() + ": precision." + what + " " + std::string(to_string(*t)) +
                            " does not fit its " + std::string(to_string(st.dtype)) +
                            " values; use " +
                            (is_float(st.dtype) ? "f64, f32, bf16 or f16" : "i8, i16, i32 or i64"));
    }
    if (pr.accumulate && !st.reduce)
      throw ScheduleError(c.where() + ": precision.accumulate applies to reductions only");
    if (pr.storage && c.program.is_output(st.name) && *pr.storage != st.dtype)
      throw ScheduleError(c.where() + " is an output, so its storage type is the interface type " +
                          std::string(to_string(st.dtype)) +
                          "; set precision.compute or .accumulate instead");
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    std::vector<StageSchedule> r;
    const std::vector<DType> types =
        is_float(c.stage.dtype)
            ? std::vector<DType>{DType::F32, DType::BF16, DType::F16, DType::F64}
        : is_int(c.stage.dtype) ? std::vector<DType>{DType::I8, DType::I16, DType::I32, DType::I64}
                                : std::vector<DType>{};
    for (const DType t : types) {
      for (int k = 0; k < 3; ++k) {
        StageSchedule v = c.ss;
        (k == 0 ? v.precision.storage : k == 1 ? v.precision.compute : v.precision.accumulate) = t;
        r.push_back(v);
      }
    }
    return r;
  }
};

}  // namespace

bool valid_precision_type(DType logical, DType t) {
  if (is_float(logical)) return is_float(t);
  if (is_int(logical)) return is_int(t);
  return t == logical;
}

const Directive& precision_directive() {
  return instance<PrecisionDirective>();
}

}  // namespace directives
}  // namespace pto
