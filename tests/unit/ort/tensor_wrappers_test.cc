// The run boundary's kept tensor wrappers (detail::TensorWrappers, src/ort/session_state.h): a
// wrapper is lent again only for the memory, type and shape it was made for, to one run at a time,
// and the lookup pauses where memory is new at every run. Real ORT wrappers, read back through
// ORT's own API.
#include <gtest/gtest.h>

#include <vector>

#include "ort_api.h"
#include "session_state.h"

namespace ebb {
namespace {

using detail::TensorWrappers;

// What ORT sees through `value`: its data pointer and shape.
struct Seen {
  const void* data;
  std::vector<int64_t> shape;
};
Seen Read(OrtValue* value) {
  Ort::UnownedValue v(value);
  return {v.GetTensorRawData(), v.GetTensorTypeAndShapeInfo().GetShape()};
}

TEST(TensorWrappersTest, AKeptWrapperIsLentAgainForTheSameMemoryTypeAndShapeOnly) {
  TensorWrappers wrappers;
  Tensor t(DataType::kFloat32, {2, 8});
  bool kept = false;
  OrtValue* first = wrappers.Lend(t, &kept);
  ASSERT_TRUE(kept) << "a free slot keeps the wrapper it made";
  EXPECT_EQ(Read(first).data, t.data());
  EXPECT_EQ(Read(first).shape, (std::vector<int64_t>{2, 8}));
  wrappers.GiveBack(&first, 1);

  OrtValue* again = wrappers.Lend(t, &kept);
  EXPECT_TRUE(kept);
  EXPECT_EQ(again, first) << "the same memory, type and shape: the kept wrapper";
  wrappers.GiveBack(&again, 1);

  // The same memory under another shape or type is another wrapper, which says so to ORT.
  Tensor view = Tensor::Borrow(DataType::kFloat32, {4, 4}, t.data());
  OrtValue* reshaped = wrappers.Lend(view, &kept);
  EXPECT_NE(reshaped, first);
  EXPECT_EQ(Read(reshaped).data, t.data());
  EXPECT_EQ(Read(reshaped).shape, (std::vector<int64_t>{4, 4}));
  wrappers.GiveBack(&reshaped, 1);
  Tensor as_ints = Tensor::Borrow(DataType::kInt32, {2, 8}, t.data());
  OrtValue* retyped = wrappers.Lend(as_ints, &kept);
  EXPECT_NE(retyped, first);
  EXPECT_EQ(Ort::UnownedValue(retyped).GetTensorTypeAndShapeInfo().GetElementType(),
            ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
  wrappers.GiveBack(&retyped, 1);

  // Other memory of the same shape: another wrapper, pointing there.
  Tensor other(DataType::kFloat32, {2, 8});
  OrtValue* elsewhere = wrappers.Lend(other, &kept);
  EXPECT_NE(elsewhere, first);
  EXPECT_EQ(Read(elsewhere).data, other.data());
  wrappers.GiveBack(&elsewhere, 1);
}

TEST(TensorWrappersTest, AWrapperIsLentToOneRunAtATime) {
  TensorWrappers wrappers;
  Tensor t(DataType::kFloat32, {1, 64});
  bool kept_a = false, kept_b = false;
  OrtValue* a = wrappers.Lend(t, &kept_a);
  OrtValue* b = wrappers.Lend(t, &kept_b);  // a second run with the same input while the first holds it
  ASSERT_TRUE(kept_a);
  EXPECT_NE(a, b) << "the kept one is lent out: the second run gets its own";
  EXPECT_EQ(Read(b).data, t.data());
  wrappers.GiveBack(&a, 1);
  if (kept_b) {
    wrappers.GiveBack(&b, 1);
  } else {
    Ort::GetApi().ReleaseValue(b);
  }
}

TEST(TensorWrappersTest, MoreTensorsThanSlotsReplaceTheLeastRecentlyUsed) {
  TensorWrappers wrappers;
  std::vector<Tensor> tensors;
  for (size_t i = 0; i <= TensorWrappers::kSlots; ++i) tensors.emplace_back(DataType::kFloat32, Shape{4});
  std::vector<OrtValue*> made;
  for (const Tensor& t : tensors) {
    bool kept = false;
    made.push_back(wrappers.Lend(t, &kept));
    ASSERT_TRUE(kept);
    wrappers.GiveBack(&made.back(), 1);
  }
  bool kept = false;
  OrtValue* newest = wrappers.Lend(tensors.back(), &kept);
  EXPECT_EQ(newest, made.back()) << "the last one made is kept";
  wrappers.GiveBack(&newest, 1);
  OrtValue* oldest = wrappers.Lend(tensors.front(), &kept);
  EXPECT_EQ(Read(oldest).data, tensors.front().data()) << "the first one was replaced: made again, for its memory";
  wrappers.GiveBack(&oldest, 1);
}

TEST(TensorWrappersTest, MemoryNewAtEveryRunPausesTheLookupUntilAWrapperIsFoundAgain) {
  TensorWrappers wrappers;
  Tensor stable(DataType::kFloat32, {8});
  bool kept = false;
  OrtValue* kept_one = wrappers.Lend(stable, &kept);
  wrappers.GiveBack(&kept_one, 1);
  // Memory that is new each time (one buffer per lend, all alive: no address comes back).
  std::vector<Tensor> fresh;
  int kept_count = 0;
  const int lends = TensorWrappers::kMissesBeforePause + 4 * TensorWrappers::kProbeEvery;
  for (int i = 0; i < lends; ++i) {
    fresh.emplace_back(DataType::kFloat32, Shape{8});
    OrtValue* v = wrappers.Lend(fresh.back(), &kept);
    EXPECT_EQ(Read(v).data, fresh.back().data());
    if (kept) {
      ++kept_count;
      wrappers.GiveBack(&v, 1);
    } else {
      Ort::GetApi().ReleaseValue(v);
    }
  }
  // Kept: the lends before the pause and the probes during it (the stable one's made it 1 + these).
  EXPECT_LE(kept_count, static_cast<int>(TensorWrappers::kMissesBeforePause) + 5);
  EXPECT_GE(kept_count, static_cast<int>(TensorWrappers::kMissesBeforePause) - 1);
  // During the pause a probe keeps what it makes; the next probe for the same memory finds it, and
  // that ends the pause: the lend right after looks again and finds it too.
  const Tensor& target = fresh.back();
  std::vector<OrtValue*> kept_ones;
  for (uint32_t i = 0; i < 2 * TensorWrappers::kProbeEvery + 2 && kept_ones.size() < 2; ++i) {
    OrtValue* v = wrappers.Lend(target, &kept);
    if (kept) {
      kept_ones.push_back(v);
      wrappers.GiveBack(&v, 1);
    } else {
      Ort::GetApi().ReleaseValue(v);
    }
  }
  ASSERT_EQ(kept_ones.size(), 2u) << "two probes within 2 x kProbeEvery lends";
  EXPECT_EQ(kept_ones[0], kept_ones[1]) << "the second probe found what the first kept";
  OrtValue* next = wrappers.Lend(target, &kept);
  EXPECT_TRUE(kept) << "looking again right after a find";
  EXPECT_EQ(next, kept_ones[0]);
  wrappers.GiveBack(&next, 1);
}

}  // namespace
}  // namespace ebb
