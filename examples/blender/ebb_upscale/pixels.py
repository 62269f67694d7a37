"""Blender images <-> the frames ebb's operations take. Main thread only (bpy).

Blender keeps pixels bottom row first, as floats in [0, 1] whatever the buffer; ebb's frames are top row
first. An 8-bit image becomes a uint8 RGB frame [H,W,3], exactly the bytes Blender holds (its floats are
byte/255, rounded back here), so ebb converts it as `ebb run` converts a PNG; a float image becomes a
float32 tensor [1,3,H,W], its values as they are. Alpha does not go through the model: it is scaled up
by repeating each value (nearest), and put back beside the result.
"""
import os
import re

import bpy
import numpy as np

from .engine import AddonError

_DEPTHS_WITH_ALPHA = (32, 64, 128)  # bits per pixel of RGBA: 8-bit, 16-bit, float


class Frame:
    """One image's pixels as ebb takes them, plus what is needed to write the result back."""

    def __init__(self, data: np.ndarray, alpha, is_float: bool, colorspace: str):
        self.data, self.alpha, self.is_float, self.colorspace = data, alpha, is_float, colorspace


def read(image: "bpy.types.Image") -> Frame:
    width, height = image.size
    channels = image.channels
    if width == 0 or height == 0:
        raise AddonError(f"image '{image.name}' has no pixels (is its file missing?)")
    if channels not in (1, 3, 4):
        raise AddonError(f"image '{image.name}' has {channels} channels; 1, 3 or 4 are supported")
    buf = np.empty(width * height * channels, np.float32)
    image.pixels.foreach_get(buf)
    px = buf.reshape(height, width, channels)[::-1]
    rgb = np.repeat(px, 3, axis=2) if channels == 1 else px[..., :3]
    # Blender's buffers have 4 channels even for RGB files; the bit depth tells whether alpha is real.
    alpha = px[..., 3].copy() if channels == 4 and image.depth in _DEPTHS_WITH_ALPHA else None
    if image.is_float:
        data = np.ascontiguousarray(rgb.transpose(2, 0, 1)[np.newaxis])
    else:
        data = np.rint(rgb * 255).astype(np.uint8)
    return Frame(data, alpha, image.is_float, image.colorspace_settings.name)


def height(data: np.ndarray) -> int:
    """Rows of a frame or result: a float32 tensor [1,C,H,W] or a uint8 image [H,W,C]."""
    return data.shape[-2] if data.ndim == 4 else data.shape[0]


def scaled_alpha(frame: Frame, height: int, width: int) -> np.ndarray:
    """The frame's alpha at the result's size (each value repeated), top row first; 1 without alpha."""
    if frame.alpha is None:
        return np.ones((height, width), np.float32)
    sy, sx = height // frame.alpha.shape[0], width // frame.alpha.shape[1]
    return np.repeat(np.repeat(frame.alpha, sy, axis=0), sx, axis=1)[:height, :width]


def result_pixels(frame: Frame, result: np.ndarray) -> np.ndarray:
    """The result in Blender's layout: float32 RGBA [H,W,4], bottom row first."""
    rgb = result[0].transpose(1, 2, 0) if frame.is_float else result.astype(np.float32) / 255
    height, width = rgb.shape[:2]
    out = np.empty((height, width, 4), np.float32)
    out[..., :3] = rgb
    out[..., 3] = scaled_alpha(frame, height, width)
    return out[::-1]


def write(name: str, frame: Frame, result: np.ndarray) -> "bpy.types.Image":
    """The result as the image `name`: the one of an earlier run is reused, resized, also once it was
    saved (Blender then made it a FILE image: its pixels are replaced, and it is marked modified)."""
    px = result_pixels(frame, result)
    height, width = px.shape[:2]
    image = bpy.data.images.get(name)
    if image is None or image.source not in ('GENERATED', 'FILE') or image.is_float != frame.is_float:
        image = bpy.data.images.new(name, width, height, alpha=frame.alpha is not None, float_buffer=frame.is_float)
    elif tuple(image.size) != (width, height):
        image.scale(width, height)
    image.colorspace_settings.name = frame.colorspace
    image.pixels.foreach_set(px.ravel())
    image.update()
    return image


# --- image sequences -------------------------------------------------------------------------------

def sequence_files(image: "bpy.types.Image", frame_start: int, frame_end: int) -> list:
    """[(frame number, path)] of an image sequence, as Blender numbers its files: the last run of digits
    in the file name, zero-padded to its width. frame_end < frame_start: every file of the sequence, the
    files in its folder named as its own with another frame number, counted on disk (Blender's
    image.frame_duration is 1 for a sequence opened from Python or found by sequence detection)."""
    if image.source != 'SEQUENCE':
        raise AddonError(f"image '{image.name}' is not an image sequence (its source is {image.source})")
    path = bpy.path.abspath(image.filepath, library=image.library)
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    match = re.search(r"(\d+)(?!.*\d)", stem)
    if not match:
        raise AddonError(f"image sequence '{image.name}': no frame number in its file name '{base}'")
    head, digits, tail = stem[:match.start()], match.group(1), stem[match.end():]
    if frame_end < frame_start:
        pattern = re.compile(re.escape(head) + r"(\d+)" + re.escape(tail + ext) + "$")
        numbers = sorted(int(m.group(1)) for m in map(pattern.match, os.listdir(folder or "."))
                         if m and f"{int(m.group(1)):0{len(digits)}d}" == m.group(1))
        frame_start, frame_end = (numbers[0], numbers[-1]) if numbers else (int(digits), int(digits))
    files = []
    for number in range(frame_start, frame_end + 1):
        file = os.path.join(folder, f"{head}{number:0{len(digits)}d}{tail}{ext}")
        if not os.path.isfile(file):
            raise AddonError(f"image sequence '{image.name}': frame {number} is missing ({file})")
        files.append((number, file))
    return files


def read_file(path: str) -> Frame:
    """A frame read from a file by Blender (any format it reads); the datablock is removed again."""
    try:
        image = bpy.data.images.load(path, check_existing=False)
    except RuntimeError as e:
        raise AddonError(f"cannot read '{path}': {e}") from None
    try:
        return read(image)
    finally:
        bpy.data.images.remove(image)


def save_file(path: str, frame: Frame, result: np.ndarray) -> None:
    """Writes a result frame: 8-bit frames as PNG with ebb (as `ebb run` writes them), float ones as
    OpenEXR with Blender."""
    if not frame.is_float:
        import ebb
        if frame.alpha is not None:
            alpha = np.rint(scaled_alpha(frame, *result.shape[:2]) * 255).astype(np.uint8)
            result = np.concatenate([result, alpha[..., np.newaxis]], axis=2)
        ebb.write_png(path, np.ascontiguousarray(result))
        return
    px = result_pixels(frame, result)
    image = bpy.data.images.new(os.path.basename(path), px.shape[1], px.shape[0], alpha=True, float_buffer=True)
    try:
        image.pixels.foreach_set(px.ravel())
        image.filepath_raw = path
        image.file_format = 'OPEN_EXR'
        image.save()
    finally:
        bpy.data.images.remove(image)
