// Precompiled for the library's sources (meson's cpp_pch): the standard
// headers most of them include. Parsing these took most of each file's
// compile time; a source still includes what it uses, and builds without
// the precompiled header (-Db_pch=false).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>
