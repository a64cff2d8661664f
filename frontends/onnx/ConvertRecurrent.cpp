// ONNX RNN, GRU and LSTM over the library's recurrent layers
// (dsl/ops/Recurrent.cpp): layout 1 (batch first) by transposes around them,
// the activation names lower-cased, Y / Y_h / Y_c as asked.
#include <algorithm>
#include <cctype>

#include "dsl/ops/Ops.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

Converter recurrent(const std::string& kind) {
  return [kind](NodeContext& c) {
    std::vector<std::string> known = {"activation_alpha", "activation_beta", "activations", "clip",
                                      "direction",        "hidden_size",     "layout"};
    if (kind == "gru") known.push_back("linear_before_reset");
    if (kind == "lstm") known.push_back("input_forget");
    c.check_attrs(known);
    if (c.has_attr("activation_alpha") || c.has_attr("activation_beta"))
      c.fail(
          "activation_alpha / activation_beta are not supported (activations: Sigmoid, Tanh, "
          "Relu)");
    if (kind == "lstm" && c.attr_int("input_forget", 0))
      c.fail("input_forget = 1 is not supported");
    const bool batch_first = c.attr_int("layout", 0) != 0;
    auto time_first = [&](const Tensor& t) {
      return batch_first ? ops::transpose(t, {1, 0, 2}) : t;
    };
    ops::RecurrentInputs in;
    in.x = time_first(c.input(0));
    in.w = c.input(1);
    in.r = c.input(2);
    if (c.has_input(3)) in.b = c.input(3);
    if (c.has_input(4)) in.seq_lens = c.input(4);
    if (c.has_input(5)) in.h0 = time_first(c.input(5));
    if (kind == "lstm" && c.has_input(6)) in.c0 = time_first(c.input(6));
    if (kind == "lstm" && c.has_input(7)) in.p = c.input(7);
    ops::RecurrentParams p;
    p.kind = kind;
    p.direction = c.attr_string("direction", "forward");
    for (std::string a : c.attr_strings("activations")) {
      std::transform(a.begin(), a.end(), a.begin(),
                     [](unsigned char ch) { return std::tolower(ch); });
      p.activations.push_back(a);
    }
    p.clip = c.has_attr("clip") ? c.attr_float("clip") : 0.0;
    if (kind == "gru") p.linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
    const int64_t hidden = c.attr_int("hidden_size", 0);
    if (hidden > 0 && static_shape(in.r, c.where()).back() != hidden)
      c.fail("hidden_size " + std::to_string(hidden) + " differs from R's last dim");
    const ops::RecurrentResult r = ops::recurrent(in, p, batch_first ? "" : c.out_name(0));
    std::vector<Value> out;
    out.push_back(Value::of(batch_first ? ops::transpose(r.y, {2, 0, 1, 3}, c.out_name(0)) : r.y));
    // The last states [dirs, batch, hidden]; batch first under layout 1.
    const auto state = [&](const Tensor& t, size_t i) {
      return Value::of(batch_first ? ops::transpose(t, {1, 0, 2}, c.out_name(i))
                                   : ops::identity(t, c.out_name(i)));
    };
    if (c.has_output(1) || c.has_output(2))  // outputs by position: Y_h's slot even when unnamed
      out.push_back(c.has_output(1) ? state(r.h, 1) : Value::of(r.h));
    if (c.has_output(2)) out.push_back(state(r.c, 2));
    return out;
  };
}

}  // namespace

void add_recurrent_converters(std::map<std::string, Converter>& t) {
  t["RNN"] = recurrent("rnn");
  t["GRU"] = recurrent("gru");
  t["LSTM"] = recurrent("lstm");
}

}  // namespace pto::onnx
