/* libFuzzer entry of the fuzz_config target (built by scripts/fuzz.sh with clang -fsanitize=fuzzer);
 * the body lives in tests/fuzz/targets.h so the corpus replay unit test runs the same code. */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_config_one(data, size);
}
