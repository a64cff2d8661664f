// A Program is the DAG of stages from input tensors to output tensors.
//
// It is built incrementally (inputs, then stages in dependency order) and every
// addition is validated at once: an access to an unknown tensor, a wrong number
// of indices, an unbound variable or a duplicate name throws a typed error that
// names the stage and the offending value. Stages are therefore always in a
// valid topological order. Program and Tensor are handles onto shared state, so
// operators can be written numpy-style (`relu(matmul(a, b) + bias)`).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsl/Error.h"
#include "dsl/Stage.h"

namespace pto {

struct TensorInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  bool is_input = false;
};

struct ProgramData;
class Tensor;

class Program {
 public:
  explicit Program(std::string name = "program");

  const std::string& name() const;

  Tensor input(const std::string& name, const Shape& shape, DType dtype = DType::F32);

  // Pure stage: name(vars...) = value.
  Tensor define(const std::string& name, const std::vector<std::string>& vars, const Shape& shape,
                const Expr& value, OpKind kind = OpKind::Custom, const std::string& op = "custom");
  // Reduction stage: name(vars...) = reduce_op over rvars of body. ArgMin/ArgMax
  // take exactly one rvar and produce an i64 index.
  Tensor define_reduce(const std::string& name, const std::vector<std::string>& vars,
                       const Shape& shape, ReduceOp reduce, const std::vector<RVar>& rvars,
                       const Expr& body, OpKind kind = OpKind::Reduction,
                       const std::string& op = "custom");
  // Adds a fully formed stage (used by JSON loading); validated like the others.
  void add_stage(Stage stage);

  // Marks a tensor as a program output. Without any, every tensor that no
  // stage reads is an output.
  void output(const Tensor& t);
  void output(const std::string& name);

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<Stage>& stages() const;
  std::vector<std::string> outputs() const;
  bool is_output(const std::string& name) const;
  const Stage& stage(const std::string& name) const;  // throws DefinitionError
  const Stage* find_stage(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // input or stage output
  bool has_tensor(const std::string& name) const;
  Tensor handle(const std::string& name) const;
  // Stages that read `name`.
  std::vector<std::string> consumers(const std::string& name) const;
  // Does stage `consumer` read `producer`, directly or through other stages?
  bool reaches(const std::string& producer, const std::string& consumer) const;
  // Symbolic sizes, and where each is first found: (input name, axis).
  std::map<std::string, std::pair<std::string, int>> symbols() const;

  // A fresh tensor name with the given prefix ("matmul", "matmul_1", ...).
  std::string unique_name(const std::string& prefix) const;
  // Do both handles refer to the same program?
  bool same_as(const Program& o) const { return d_ == o.d_; }
  // Deep copy (Program itself is a shared handle).
  Program clone() const;
  // Readable listing: inputs, then one line per stage.
  std::string str() const;

 private:
  explicit Program(std::shared_ptr<ProgramData> d) : d_(std::move(d)) {}
  friend class Tensor;
  std::shared_ptr<ProgramData> d_;
};

// A handle to a tensor of a Program. `A(i, j)` builds an access expression.
class Tensor {
 public:
  Tensor() = default;
  const std::string& name() const { return name_; }
  const TensorInfo& info() const;
  const Shape& shape() const { return info().shape; }
  DType dtype() const { return info().dtype; }
  int rank() const { return static_cast<int>(info().shape.size()); }
  Program program() const { return Program(prog_); }
  bool defined() const { return prog_ != nullptr; }

  Expr operator()(std::vector<Expr> idx) const;
  template <typename... Args>
  Expr operator()(Args&&... idx) const {
    return (*this)(std::vector<Expr>{Expr(std::forward<Args>(idx))...});
  }

 private:
  friend class Program;
  Tensor(std::shared_ptr<ProgramData> p, std::string n) : prog_(std::move(p)), name_(std::move(n)) {}
  std::shared_ptr<ProgramData> prog_;
  std::string name_;
};

}  // namespace pto
