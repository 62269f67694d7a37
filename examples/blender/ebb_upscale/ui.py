"""The add-on's preferences, its panel in the Image Editor's sidebar (tab "ebb") and its menu entries."""
import bpy
from bpy.props import IntProperty, StringProperty

from .engine import ENGINE, MiB, BUNDLED_MODEL


class EbbUpscalePreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    model_folder: StringProperty(
        name="Model folder", subtype='DIR_PATH', default="",
        description="An image_to_image model folder (model.onnx and a config.json with \"kind\": "
                    "\"image_to_image\"); empty: the bundled waifu2x 2x upscaler")
    tile_size: IntProperty(
        name="Tile size", default=0, min=0, soft_max=1024,
        description="Tile side in pixels; 0: the model's config.json (128 for the bundled model). Bigger tiles "
                    "run faster and need more memory while the job runs")
    policy_file: StringProperty(
        name="Memory policy", subtype='FILE_PATH', default="",
        description="An ebb memory policy JSON file; empty: ebb's defaults (shared CPU arena, released after "
                    "each job)")

    def draw(self, context):
        layout = self.layout
        layout.prop(self, "model_folder")
        if not self.model_folder:
            layout.label(text=f"Bundled: {BUNDLED_MODEL}")
        layout.prop(self, "tile_size")
        layout.prop(self, "policy_file")


def _mib(n: int) -> str:
    return f"{n / MiB:.0f} MiB"


class EBB_PT_upscale(bpy.types.Panel):
    bl_label = "ebb Upscale"
    bl_space_type = 'IMAGE_EDITOR'
    bl_region_type = 'UI'
    bl_category = "ebb"

    def draw(self, context):
        layout = self.layout
        image = getattr(context.space_data, "image", None)
        col = layout.column(align=True)
        row = col.row()
        row.enabled = image is not None
        row.operator("ebb.upscale_image", icon='IMAGE_DATA').image = image.name if image else ""
        is_sequence = image is not None and image.source == 'SEQUENCE'
        row = col.row()
        row.enabled = is_sequence
        op = row.operator("ebb.upscale_sequence", icon='SEQUENCE')
        op.image = image.name if image else ""
        if is_sequence:
            wm = context.window_manager
            col.prop(wm, "ebb_frame_start")
            col.prop(wm, "ebb_frame_end")
            col.prop(wm, "ebb_directory")
            op.frame_start, op.frame_end, op.directory = wm.ebb_frame_start, wm.ebb_frame_end, wm.ebb_directory

        job = ENGINE.job
        if job is not None and not job.finished:
            box = layout.box()
            box.label(text=job.label, icon='TIME')
            box.label(text=f"run {job.done}/{job.total}" if job.total else "starting")
            box.label(text="cancelling..." if job.cancel_requested else "Esc cancels")

        box = layout.box()
        box.label(text="Loaded models", icon='FILE_3D')
        if not ENGINE.models:
            box.label(text="none (the first upscale loads)")
        for model in ENGINE.models.values():
            box.label(text=f"{model.name} on {model.session.device}")
        if ENGINE.models:
            box.operator("ebb.unload_models", icon='X')

        last = ENGINE.last
        if last is not None:
            box = layout.box()
            box.label(text="Last job", icon='INFO')
            box.label(text=f"{last['label']}: {last['outcome']}")
            box.label(text=f"{last['runs']} runs, {last['seconds']:.1f} s")
            box.label(text=f"took {_mib(last['took'])}, gave back {_mib(last['gave_back'])}")
            box.label(text=f"RSS {_mib(last['before']['rss'])} -> {_mib(last['peak']['rss'])} -> "
                           f"{_mib(last['after']['rss'])}")
            box.label(text=f"arena peak {_mib(last['peak']['arena'])}, after {_mib(last['after']['arena'])}")


def menu_entries(self, context):
    self.layout.separator()
    self.layout.operator("ebb.upscale_image")
    self.layout.operator("ebb.upscale_sequence")


classes = (EbbUpscalePreferences, EBB_PT_upscale)

# The panel's sequence settings: on the window manager, so they live for the session and are not saved.
window_manager_properties = {
    "ebb_frame_start": IntProperty(name="First frame", default=1,
                                   description="Number of the first file frame to upscale"),
    "ebb_frame_end": IntProperty(name="Last frame", default=0,
                                 description="Number of the last file frame; below the first: the whole sequence"),
    "ebb_directory": StringProperty(name="Output folder", subtype='DIR_PATH', default="",
                                    description="Where the frames go (empty: 'upscaled' beside the frames)"),
}
