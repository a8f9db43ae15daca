# lit configuration for kvjit's FileCheck tests (one file per pass or dialect).
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "kvjit"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvjit_obj_root, "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
config.substitutions.append(("%shared", config.kvjit_shared_dir))

# Tests of the real model need the shared folder's copy of it.
if os.path.exists(os.path.join(config.kvjit_shared_dir, "models", "stories260K.gguf")):
    config.available_features.add("stories260k")
# `kvjit compile --target cuda` needs a build with the CUDA toolkit.
config.available_features.add("cuda" if config.kvjit_have_cuda else "no-cuda")

tool_dirs = [
    os.path.join(config.kvjit_tools_dir, "kvjit-opt"),
    os.path.join(config.kvjit_tools_dir, "kvjit"),
    config.llvm_tools_dir,
]
llvm_config.add_tool_substitutions(
    [ToolSubst("kvjit-opt", unresolved="fatal"), ToolSubst("kvjit", unresolved="fatal")],
    tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
