// The real upscaler (waifu2x scale2.0x converted to ONNX) on a real photo:
// ebb's tiled output must match an independent NumPy reference, and look
// like a clean 2x upscale (closer to the original than nearest neighbour).
#include <gtest/gtest.h>

#include <cmath>

#include "ebb/image.h"
#include "ebb/tiler.h"
#include "test_util.h"

namespace ebb {
namespace {

const std::string kFixtures = std::string(EBB_MODELS_DIR) + "/../tests/fixtures/";

Image MustRead(const std::string& name) {
  auto image = ReadImage(kFixtures + name);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? *image : Image{};
}

double Psnr(const Image& a, const Image& b) {
  double mse = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const double d = static_cast<double>(a.pixels[i]) - static_cast<double>(b.pixels[i]);
    mse += d * d;
  }
  mse /= static_cast<double>(a.pixels.size());
  return 10 * std::log10(255.0 * 255.0 / std::max(mse, 1e-12));
}

Image NearestUpscale(const Image& in) {
  Image out{in.width * 2, in.height * 2, in.channels, {}};
  out.pixels.resize(static_cast<size_t>(out.width * out.height * out.channels));
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      for (int c = 0; c < in.channels; ++c) {
        out.pixels[static_cast<size_t>((y * out.width + x) * in.channels + c)] =
            in.pixels[static_cast<size_t>(((y / 2) * in.width + x / 2) * in.channels + c)];
      }
    }
  }
  return out;
}

TEST(UpscalerTest, TiledRealPhotoMatchesTheReferenceAndBeatsNearestNeighbour) {
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok());
  auto session = (*runtime)->Load(testing::ModelPath("waifu2x_scale2x"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Image input = MustRead("astronaut_96.png");
  const Image reference = MustRead("astronaut_96_waifu2x_ref.png");
  const Image original = MustRead("astronaut_192.png");
  ASSERT_EQ(input.width, 96);

  auto tensor = ImageToTensor(input, 3);
  ASSERT_TRUE(tensor.ok());
  std::vector<Tensor> frames;
  frames.push_back(std::move(tensor).value());
  auto out = RunTiled(**runtime, *session, frames, {.tile = 48, .overlap = 8});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto upscaled = TensorToImage((*out)[0]);
  ASSERT_TRUE(upscaled.ok());
  ASSERT_EQ(upscaled->width, 192);
  ASSERT_EQ(upscaled->height, 192);

  int worst = 0;
  for (size_t i = 0; i < upscaled->pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{upscaled->pixels[i]} - int{reference.pixels[i]}));
  }
  EXPECT_LE(worst, 1) << "ebb's tiled ORT result must match the NumPy reference to 8-bit rounding";

  const double model_psnr = Psnr(*upscaled, original);
  const double nearest_psnr = Psnr(NearestUpscale(input), original);
  EXPECT_GT(model_psnr, nearest_psnr + 2.0) << "model " << model_psnr << " dB, nearest " << nearest_psnr << " dB";
}

}  // namespace
}  // namespace ebb
