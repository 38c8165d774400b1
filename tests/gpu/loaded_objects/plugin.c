/* An object for test_gpu_load_watch to load and unload (built twice, as
 * two files). */
int zc_test_plugin_answer(void) { return 42; }
