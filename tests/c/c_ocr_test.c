/* The C API's OCR (ebb_ocr_*): the bundled page read through a pipeline folder, from a file and
 * from pixels, as the same JSON; clear errors for a non-image and for bad arguments. */
#include "c_test.h"

static ebb_runtime_t* g_rt = NULL;

static void test_ocr_files_and_pixels(void) {
  ebb_ocr_t* ocr = NULL;
  CHECK_OK(ebb_ocr_load(g_rt, EBB_MODELS_DIR "/ocr", NULL, &ocr));
  const char* paths[] = {fixture("ocr_page.png")};
  char* json = NULL;
  CHECK_OK(ebb_ocr_files(ocr, paths, 1, NULL, &json));
  CHECK(strstr(json, "\"text\":\"Invoice") != NULL);  /* its spaces: README's example */
  CHECK(strstr(json, "\"text\":\"ebb keeps models loaded,\"") != NULL);
  CHECK(strstr(json, "\"text\":\"and gives their memory back.\"") != NULL);
  CHECK(strstr(json, "\"box\":[[") != NULL);
  ebb_free(json);

  /* A white 8-bit gray page: no text, no lines. */
  static uint8_t white[64 * 48];
  memset(white, 255, sizeof white);
  const uint8_t* pixels[] = {white};
  const int w[] = {64}, h[] = {48}, c[] = {1};
  CHECK_OK(ebb_ocr_images(ocr, pixels, w, h, c, 1, NULL, &json));
  CHECK(strcmp(json, "[{\"lines\":[]}]") == 0);
  ebb_free(json);

  /* Not an image: invalid argument naming the file; the handle keeps working. */
  const char* bad[] = {EBB_MODELS_DIR "/ocr/config.json"};
  CHECK_CODE(ebb_ocr_files(ocr, bad, 1, NULL, &json), EBB_INVALID_ARGUMENT, "config.json");
  CHECK(json == NULL);
  const int zero[] = {0};
  CHECK_CODE(ebb_ocr_images(ocr, pixels, zero, h, c, 1, NULL, &json), EBB_INVALID_ARGUMENT, "image 0");
  CHECK_CODE(ebb_ocr_files(NULL, paths, 1, NULL, &json), EBB_INVALID_ARGUMENT, "ocr");
  ebb_ocr_destroy(ocr);
  ebb_ocr_t* other = NULL;
  CHECK_CODE(ebb_ocr_load(g_rt, EBB_MODELS_DIR "/waifu2x_scale2x", NULL, &other), EBB_INVALID_ARGUMENT, "kind");
  CHECK(other == NULL);
}

int main(void) {
  if (!create_shared_runtime(&g_rt)) return 1;
  RUN_TEST(test_ocr_files_and_pixels);
  ebb_runtime_destroy(g_rt);
  return report_failures();
}
