// Precompiled for the extension's sources (meson's cpp_pch): torch's
// headers, whose parsing took most of each file's compile time. A source
// still includes what it uses, and builds without it (-Db_pch=false).
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
