"""Build glue: setuptools drives CMake for the native extension and ships the catalog data with the package."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# Data shipped inside the package (prenet/data/...), taken from the repository's data/ folder: the catalog and
# the predictor bundles.
PACKAGE_DATA = ["gpus.csv", "gpu_prices.csv", "hosts.csv", "host_costs.json", "gpu_host_costs.json",
                "gpu_launch_gaps.json", "predictors"]


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures and builds the CMake project in a persistent build folder, so rebuilds are incremental
    and ctest can run the GoogleTest suite from the same build."""

    def build_extension(self, ext):
        module_dir = Path(self.get_ext_fullpath(ext.name)).parent.resolve()
        build_dir = Path(os.environ.get("PRENET_BUILD_DIR", ROOT / "build" / "cmake")).resolve()
        args = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DPRENET_PYTHON_MODULE_DIR={module_dir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            args += ["-G", "Ninja"]
        try:
            import pybind11  # pip's pybind11 where Debian's CMake config is absent (e.g. a GPU machine)
            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        args += os.environ.get("PRENET_CMAKE_ARGS", "").split()
        subprocess.run(args, check=True)
        jobs = os.environ.get("PRENET_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build_dir), "--parallel", jobs], check=True)


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "prenet" / "data"
        shutil.rmtree(target, ignore_errors=True)  # a build folder kept from an earlier build holds stale files
        target.mkdir(parents=True)
        for name in PACKAGE_DATA:
            source = ROOT / "data" / name
            if source.is_dir():
                shutil.copytree(source, target / name, dirs_exist_ok=True)
            elif source.exists():
                shutil.copy2(source, target / name)


setup(
    ext_modules=[CMakeExtension("prenet._core")],
    cmdclass={"build_ext": CMakeBuild, "build_py": BuildPyWithData},
)
