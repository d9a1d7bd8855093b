"""Hooks into Inductor's wrapper code generation (installed as aoti_debug.codegen_patches)."""
