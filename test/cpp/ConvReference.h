// A float64 reference for channels-first convolutions over any number of
// spatial dims (groups, stride, padding, dilation, bias, a ReLU epilogue),
// plain loops independent of the op library's definition, for the tests of
// the rules that schedule them (test_default_windows.cpp,
// test_default_im2col.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "test/cpp/Helpers.h"

namespace pto::test {

struct ConvGeometry {
  int64_t n, c, o;
  std::vector<int64_t> in, k;  // spatial sizes, kernel sizes (outermost first)
  std::vector<int> stride, pad, dil;
  int groups;
  bool relu;

  std::vector<int64_t> out_sizes() const {
    std::vector<int64_t> os;
    for (size_t s = 0; s < in.size(); ++s)
      os.push_back((in[s] + 2 * pad[s] - dil[s] * (k[s] - 1) - 1) / stride[s] + 1);
    return os;
  }
};

// out[n, o, q...] = b[o] + sum over c < C/groups, t... of
//   in[n, group(o) * C/groups + c, q*s + t*d - p ...] * w[o, c, t...], zero outside the image.
inline HostTensor conv_reference(const ConvGeometry& k, const HostTensor& x, const HostTensor& w,
                                 const HostTensor* b) {
  const auto os = k.out_sizes();
  const size_t sp = k.in.size();
  int64_t pixels = 1, taps = 1, inpix = 1;
  for (size_t s = 0; s < sp; ++s) pixels *= os[s], taps *= k.k[s], inpix *= k.in[s];
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  std::vector<int64_t> shape{k.n, k.o};
  for (int64_t v : os) shape.push_back(v);
  HostTensor r{shape, std::vector<double>(static_cast<size_t>(k.n * k.o * pixels))};
  size_t idx = 0;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t q = 0; q < pixels; ++q) {
        double acc = b ? b->data[static_cast<size_t>(o)] : 0.0;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < taps; ++t) {
            int64_t qr = q, tr = t, off = 0, stride_in = 1;
            bool ok = true;
            std::vector<int64_t> pos(sp);
            for (size_t s = sp; s-- > 0;) {
              const int64_t qs = qr % os[s], ts = tr % k.k[s];
              qr /= os[s], tr /= k.k[s];
              pos[s] = qs * k.stride[s] + ts * k.dil[s] - k.pad[s];
              ok &= pos[s] >= 0 && pos[s] < k.in[s];
            }
            if (!ok) continue;
            for (size_t s = sp; s-- > 0;) off += pos[s] * stride_in, stride_in *= k.in[s];
            const int64_t ic = (o / og) * cg + c;
            acc += x.data[static_cast<size_t>((n * k.c + ic) * inpix + off)] *
                   w.data[static_cast<size_t>((o * cg + c) * taps + t)];
          }
        r.data[idx++] = k.relu ? std::max(acc, 0.0) : acc;
      }
  return r;
}

}  // namespace pto::test
