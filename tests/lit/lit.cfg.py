# lit configuration for kvjit's FileCheck tests (one file per pass or dialect).
import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "kvjit"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvjit_obj_root, "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]

llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "KVJIT_MODEL_DIR"])
llvm_config.use_default_substitutions()
config.substitutions.append(("%shared", config.kvjit_shared_dir))
# The source and build trees, for tests that run a document's commands.
config.substitutions.append(("%kvjit_src_root", config.kvjit_source_dir))
config.substitutions.append(("%kvjit_obj_root", config.kvjit_obj_root))
# The pass plugin of the --load-pass-plugin tests (tests/passplugin).
config.substitutions.append(("%count_ops_plugin", config.kvjit_count_ops_plugin))
# Tensor-parallel ranks on this machine: more ranks than cores is the
# test's choice, and CI runs as root, which Open MPI refuses unless told.
config.substitutions.append(
    ("%mpirun", "mpirun --oversubscribe --bind-to none --allow-run-as-root"))
# The python lit runs under, for the tests' helper scripts.
config.substitutions.append(("%python", sys.executable))

# Tests of the real model need the shared folder's copy of it.
if os.path.exists(os.path.join(config.kvjit_shared_dir, "models", "stories260K.gguf")):
    config.available_features.add("stories260k")
# And of SmolLM2, the copy tools/scripts/fetch_model.sh downloads.
smollm2 = os.path.join(
    os.environ.get("KVJIT_MODEL_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kvjit", "models"),
    "SmolLM2-135M-Instruct.Q4_1.gguf")
if os.path.exists(smollm2):
    config.available_features.add("smollm2")
    config.substitutions.append(("%smollm2", smollm2))
# `kvjit compile --target cuda` works in a build with the CUDA toolkit and is
# refused, with a reason, in one without: each build has the test of its own
# behaviour and not the other's, so neither shows as UNSUPPORTED (which CI
# counts as a test that did not run).
config.excludes.append(
    "kvjit-compile-cuda-absent.test" if config.kvjit_have_cuda else "kvjit-compile-cuda.test")

tool_dirs = [
    os.path.join(config.kvjit_tools_dir, "kvjit-opt"),
    os.path.join(config.kvjit_tools_dir, "kvjit"),
    config.llvm_tools_dir,
]
llvm_config.add_tool_substitutions(
    [ToolSubst("kvjit-opt", unresolved="fatal"), ToolSubst("kvjit", unresolved="fatal")],
    tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
