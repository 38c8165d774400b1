/* A stand-in libcuda.so.1 for test_gpu_load_watch: the entry points the
 * driver table requires (cuda_driver.cpp), a recognisable version, and no
 * device. Loaded with dlopen by the test, never found by a search: it lives
 * in a folder no rpath or library path names. */
int cuInit(unsigned flags) {
  (void)flags;
  return 100; /* CUDA_ERROR_NO_DEVICE */
}

int cuDriverGetVersion(int* version) {
  *version = 4242;
  return 0;
}

int cuGetErrorName(int error, const char** name) {
  (void)error;
  *name = "CUDA_ERROR_NO_DEVICE";
  return 0;
}

int cuGetErrorString(int error, const char** text) {
  (void)error;
  *text = "no CUDA-capable device is detected (test stand-in)";
  return 0;
}

int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  (void)data, (void)attribute, (void)ptr;
  return 1; /* CUDA_ERROR_INVALID_VALUE: not device memory */
}

int cuPointerGetAttributes(unsigned n, int* attributes, void** data, unsigned long long ptr) {
  (void)n, (void)attributes, (void)data, (void)ptr;
  return 1;
}
