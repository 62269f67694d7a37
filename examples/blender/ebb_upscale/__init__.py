"""ebb Upscale: upscale images and image sequences in Blender with ONNX models kept loaded, whose inference
memory goes back to Blender after every job.

The add-on is thin: the memory behaviour (what is released when, a cancelled job's memory given back) is
ebb's, through its operations (Runtime.run_tiled). See README.md beside this file for how to install it
with ebb's wheel, in the legacy form below (Blender 3.x to 4.1) or as an extension (4.2+,
blender_manifest.toml).

Modules: engine (ebb: the cached runtime and models, jobs on a worker thread; no bpy), pixels (Blender
images <-> frames), operators (ebb.upscale_image, ebb.upscale_sequence, ebb.unload_models), ui
(preferences, the Image Editor panel).
"""

bl_info = {
    "name": "ebb Upscale",
    "author": "ebb contributors",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "Image Editor > Sidebar > ebb; Image menu",
    "description": "Upscale images and frame sequences with ONNX models that give their memory back",
    "category": "Image",
}

import bpy

from . import engine, operators, ui

_classes = operators.classes + ui.classes


def register():
    for cls in _classes:
        bpy.utils.register_class(cls)
    for name, prop in ui.window_manager_properties.items():
        setattr(bpy.types.WindowManager, name, prop)
    bpy.types.IMAGE_MT_image.append(ui.menu_entries)


def unregister():
    bpy.types.IMAGE_MT_image.remove(ui.menu_entries)
    for name in ui.window_manager_properties:
        delattr(bpy.types.WindowManager, name)
    for cls in reversed(_classes):
        bpy.utils.unregister_class(cls)
    engine.ENGINE.drop()  # a running job is cancelled and waited for; the runtime and models go
