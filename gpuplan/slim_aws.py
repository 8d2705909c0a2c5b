"""pulumi_aws service packages that load only the files a program asks for, for the offline runs of
`check` and `cost`. Each generated service package's __init__ imports every resource of the service
(ec2: 180 files) before the program reads one class; for the six services the components use that was
~1.5 s of a ~2.3 s check on 2 shared cores against ~0.6 s for the files they read (issue 29).

A name is looked up where pulumi's code generator puts it: `FooArgs`/`FooArgsDict` in `_inputs.py`,
class `LustreFileSystem` in `lustre_file_system.py`, function `get_region(_output)` in `get_region.py`.
Anything else (or a file that is not there) runs the package's own __init__ into the module, so every
name still resolves, only slower. The classes are the very objects the full package would export."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

_CAMEL_BOUNDARY = re.compile(r"(?<!^)(?=[A-Z])")


def _file_for(name: str) -> str:
    if name.endswith(("Args", "ArgsDict")):
        return "_inputs"
    if name[:1].isupper():
        return _CAMEL_BOUNDARY.sub("_", name).lower()
    return name.removesuffix("_output")


class SlimService(types.ModuleType):
    """A pulumi_aws.<service> module whose attributes import their own file on first use."""

    def __getattr__(self, name: str):
        if name.startswith("__") or self.__dict__.get("_slim_loading_all"):
            raise AttributeError(name)
        target = f"{self.__name__}.{_file_for(name)}"
        try:
            # a file being imported (`from . import outputs` inside it) is taken as it stands, as Python would
            module = sys.modules.get(target) or importlib.import_module(target)
            value = getattr(module, name) if _file_for(name) != name else getattr(module, name, module)
        except (ImportError, AttributeError):
            value = self._load_everything(name)
        setattr(self, name, value)
        return value

    def _load_everything(self, name: str):
        """The package's own __init__ run into this module; then `name` is there or does not exist."""
        if not self.__dict__.get("_slim_loaded_all"):
            init = Path(self.__path__[0]) / "__init__.py"
            self.__dict__["_slim_loading_all"] = True
            try:
                exec(compile(init.read_bytes(), str(init), "exec"), self.__dict__)  # noqa: S102 (the package's code)
            finally:
                self.__dict__["_slim_loading_all"] = False
            self.__dict__["_slim_loaded_all"] = True
        if name not in self.__dict__:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return self.__dict__[name]


def install(services: tuple[str, ...]) -> None:
    """Put a SlimService in place of each pulumi_aws.<service> not yet loaded (an already loaded one is
    left as it is)."""
    import pulumi_aws

    for service in services:
        fullname = f"pulumi_aws.{service}"
        current = sys.modules.get(fullname)
        if current is not None and not _unloaded(current):
            continue
        spec = (importlib.util.find_spec(fullname) if current is None  # reading __spec__ loads no lazy module
                else types.ModuleType.__getattribute__(current, "__spec__"))
        module = SlimService(fullname)
        module.__path__ = list(spec.submodule_search_locations or [])
        module.__package__, module.__file__ = fullname, spec.origin
        sys.modules[fullname] = module
        setattr(pulumi_aws, service, module)


def _unloaded(module: types.ModuleType) -> bool:
    """A module pulumi's lazy_import registered but nothing has read yet (importlib's LazyLoader)."""
    return type(module).__name__ == "_LazyModule"
