"""The operators: ebb.upscale_image, ebb.upscale_sequence, ebb.unload_models.

Both upscalers work the same way. The main thread reads the pixels (bpy), the engine starts ONE ebb
operation on a worker thread, and the results are written back on the main thread when it finishes:
- invoke (the UI): a modal operator; a timer updates Blender's progress bar and the status text, the UI
  stays live (events pass through), Esc cancels between runs (ebb gives the memory back);
- execute (scripts, tests, no UI): the same job, waited for; another thread may cancel it (job.cancel()).
Every error becomes a Blender report (scripts see it as RuntimeError, Blender's way), never a traceback.
A cancelled or failed job writes nothing.
"""
import os
import sys
import traceback

import bpy
from bpy.props import IntProperty, StringProperty

from . import pixels
from .engine import ENGINE, MiB, AddonError, describe_error

_EXPECTED = (AddonError, OSError)


def preferences(context):
    return context.preferences.addons[__package__].preferences


def report_error(op, error: BaseException) -> None:
    """A Blender report for an error; only a bug (not ebb's, not the add-on's own errors) prints its
    traceback to the console as well."""
    ebb = sys.modules.get("ebb")
    expected = isinstance(error, _EXPECTED) or (ebb is not None and isinstance(error, ebb.Error))
    if not expected:
        traceback.print_exception(type(error), error, error.__traceback__)
    kind = 'ERROR_OUT_OF_MEMORY' if getattr(error, "code", None) == "resource_exhausted" else 'ERROR'
    op.report({kind}, "ebb: " + describe_error(error))


def redraw(context) -> None:
    screen = getattr(context, "screen", None)
    for area in screen.areas if screen else ():
        if area.type == 'IMAGE_EDITOR':
            area.tag_redraw()


class _Upscale:
    """What the two upscalers share: starting the job, the modal loop, finishing."""

    def gather(self, context) -> tuple:
        """(frames for ebb, what `store` needs). Main thread."""
        raise NotImplementedError

    def store(self, context, meta, results) -> str:
        """Writes the results; returns the report's words."""
        raise NotImplementedError

    def start(self, context):
        """(the started job, what `store` needs), or (None, None) after reporting why not."""
        try:
            prefs = preferences(context)
            frames, meta = self.gather(context)
            job = ENGINE.start(bpy.path.abspath(prefs.model_folder), bpy.path.abspath(prefs.policy_file),
                               [f.data for f in frames], prefs.tile_size, self.label())
            return job, meta
        except BaseException as e:
            report_error(self, e)
            return None, None

    def finish(self, context, job, meta) -> set:
        ENGINE.finish(job)
        error, results = job.error, job.results
        job.results = None  # Blender may keep this operator (and so the job) for its redo panel
        if error is not None:
            if getattr(error, "code", None) == "cancelled":
                self.report({'WARNING'}, f"ebb: cancelled after {job.done} of {job.total} runs; nothing written, "
                                         "the memory was given back")
            else:
                report_error(self, error)
            return {'CANCELLED'}
        try:
            written = self.store(context, meta, results)
        except BaseException as e:
            report_error(self, e)
            return {'CANCELLED'}
        last = ENGINE.last
        runs = f"{job.done} run{'s' if job.done != 1 else ''}"
        self.report({'INFO'}, f"ebb: {written} in {job.seconds:.1f} s ({runs}, one release); memory: took "
                              f"{last['took'] / MiB:.0f} MiB, gave back {last['gave_back'] / MiB:.0f} MiB")
        return {'FINISHED'}

    # --- no UI: scripts and tests ---
    def execute(self, context):
        job, meta = self.start(context)
        if job is None:
            return {'CANCELLED'}
        job.wait()
        return self.finish(context, job, meta)

    # --- the UI: modal, with a timer ---
    def invoke(self, context, event):
        if not self.image:
            space = context.space_data
            image = getattr(space, "image", None) if space and space.type == 'IMAGE_EDITOR' else None
            if image is None:
                self.report({'ERROR'}, "ebb: no image: open one in the Image Editor or set the operator's image")
                return {'CANCELLED'}
            self.image = image.name
        self._job, self._meta = self.start(context)
        if self._job is None:
            return {'CANCELLED'}
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.progress_begin(0.0, 1.0)
        wm.modal_handler_add(self)
        self.show_progress(context)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        job = self._job
        if event.type == 'ESC' and event.value == 'PRESS':
            job.cancel()  # ebb stops before its next run
            self.show_progress(context)
            return {'RUNNING_MODAL'}
        if event.type == 'TIMER':  # ours or another's: either way a moment to look at the job
            if not job.finished:
                self.show_progress(context)
                return {'PASS_THROUGH'}
            self.end_modal(context)
            meta, self._job, self._meta = self._meta, None, None
            return self.finish(context, job, meta)
        return {'PASS_THROUGH'}  # the rest of Blender keeps working meanwhile

    def cancel(self, context):  # Blender ends the modal operator (a file loads, the window closes)
        job, self._job, self._meta = self._job, None, None
        job.cancel()
        job.wait()
        self.end_modal(context)
        ENGINE.finish(job)

    def show_progress(self, context) -> None:
        job = self._job
        if job.total:
            context.window_manager.progress_update(job.done / job.total)
        runs = f"run {job.done}/{job.total}" if job.total else "starting"
        state = "cancelling" if job.cancel_requested else "Esc to cancel"
        context.workspace.status_text_set(f"ebb: {job.label}: {runs} ({state})")
        redraw(context)

    def end_modal(self, context) -> None:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        context.workspace.status_text_set(None)
        redraw(context)


def _image(name: str):
    image = bpy.data.images.get(name)
    if image is None:
        raise AddonError(f"no image named '{name}'")
    return image


class EBB_OT_upscale_image(_Upscale, bpy.types.Operator):
    """Upscale the image with the add-on's model (tiled, one ebb operation; Esc cancels)"""
    bl_idname = "ebb.upscale_image"
    bl_label = "Upscale"
    bl_options = {'REGISTER'}

    image: StringProperty(name="Image", description="The image datablock to upscale (default: the Image "
                                                    "Editor's image)")

    def label(self) -> str:
        return f"upscaling '{self.image}'"

    def gather(self, context):
        image = _image(self.image)
        frame = pixels.read(image)
        return [frame], (image.name, frame, tuple(image.size))

    def store(self, context, meta, results):
        name, frame, (width, height) = meta
        result = pixels.write(f"{name}_{pixels.height(results[0]) // height}x", frame, results[0])
        space = getattr(context, "space_data", None)
        if space is not None and space.type == 'IMAGE_EDITOR':
            space.image = result
        return f"'{name}' {width}x{height} -> '{result.name}' {result.size[0]}x{result.size[1]}"


class EBB_OT_upscale_sequence(_Upscale, bpy.types.Operator):
    """Upscale frames of an image sequence, all of them as ONE ebb operation (one release at the end)"""
    bl_idname = "ebb.upscale_sequence"
    bl_label = "Upscale Sequence"
    bl_options = {'REGISTER'}

    image: StringProperty(name="Image", description="The image sequence datablock (default: the Image "
                                                    "Editor's image)")
    frame_start: IntProperty(name="First frame", default=1,
                             description="Number of the first file frame (as in the file names)")
    frame_end: IntProperty(name="Last frame", default=0,
                           description="Number of the last file frame; below the first: the image's whole sequence")
    directory: StringProperty(name="Output folder", subtype='DIR_PATH',
                              description="Where the upscaled frames go (default: 'upscaled' beside the frames)")

    def label(self) -> str:
        return f"upscaling the sequence '{self.image}'"

    def gather(self, context):
        image = _image(self.image)
        files = pixels.sequence_files(image, self.frame_start, self.frame_end)
        out_dir = self.output_folder(files)
        frames = [pixels.read_file(path) for _, path in files]
        return frames, (image.name, files, frames, out_dir)

    def output_folder(self, files) -> str:
        """The output folder, checked before any work: 'upscaled' beside the frames by default; a path
        relative to the .blend file ('//up') needs a saved .blend, and a path relative to nothing else
        (it would land in Blender's working folder) is refused."""
        if not self.directory:
            return os.path.join(os.path.dirname(files[0][1]), "upscaled")
        if self.directory.startswith("//") and not bpy.data.filepath:
            raise AddonError(f"output folder '{self.directory}' is relative to the .blend file, which is not "
                             "saved yet: save it first, or give an absolute folder")
        out_dir = bpy.path.abspath(self.directory)
        if not os.path.isabs(out_dir):
            raise AddonError(f"output folder '{self.directory}' is relative: give an absolute folder, or one "
                             "relative to the saved .blend file ('//up')")
        return out_dir

    def store(self, context, meta, results):
        name, files, frames, out_dir = meta
        os.makedirs(out_dir, exist_ok=True)
        written = []
        for (_, path), frame, result in zip(files, frames, results):
            stem = os.path.splitext(os.path.basename(path))[0]
            written.append(os.path.join(out_dir, stem + (".exr" if frame.is_float else ".png")))
            pixels.save_file(written[-1], frame, result)
        scale = pixels.height(results[0]) // pixels.height(frames[0].data)
        sequence = bpy.data.images.get(f"{name}_{scale}x")
        if sequence is not None and sequence.source == 'SEQUENCE' and bpy.path.abspath(sequence.filepath) == written[0]:
            sequence.reload()
        else:
            sequence = bpy.data.images.load(written[0], check_existing=False)
            sequence.name = f"{name}_{scale}x"
            sequence.source = 'SEQUENCE'
        space = getattr(context, "space_data", None)
        if space is not None and space.type == 'IMAGE_EDITOR':  # show it, its first frame at scene frame 1
            space.image = sequence
            space.image_user.frame_start = 1
            space.image_user.frame_offset = files[0][0] - 1
            space.image_user.frame_duration = len(files)
        return f"{len(written)} frames of '{name}' -> {out_dir} (image '{sequence.name}')"


class EBB_OT_unload_models(bpy.types.Operator):
    """Unload the add-on's models (the next upscale loads again)"""
    bl_idname = "ebb.unload_models"
    bl_label = "Unload Models"

    def execute(self, context):
        if ENGINE.job is not None and not ENGINE.job.finished:
            self.report({'ERROR'}, "ebb: a job is running; cancel it first (Esc)")
            return {'CANCELLED'}
        ENGINE.unload_models()
        redraw(context)
        return {'FINISHED'}


classes = (EBB_OT_upscale_image, EBB_OT_upscale_sequence, EBB_OT_unload_models)
