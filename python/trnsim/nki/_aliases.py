"""``import nki``, ``nki.language``, ``nki.isa``, ``neuronxcc.nki`` and ``neuronxcc.nki.*`` resolve to
``trnsim.nki`` and its submodules: a finder at the front of ``sys.meta_path``, so a kernel file written for NKI
runs unchanged."""

import importlib
import importlib.abc
import importlib.util
import sys
import types

_TARGET = "trnsim.nki"
_PREFIXES = ("nki", "neuronxcc.nki")


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias as the target module itself. The import system sets the module's __spec__ to the alias's
    after create_module; exec_module puts the target's own back, so the module stays consistent (__spec__.parent
    is __package__: relative imports inside it raise no ImportWarning)."""

    def __init__(self, target):
        self.target = target
        self.spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        if self.spec is not None:
            module.__spec__ = self.spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "neuronxcc":
            return importlib.util.spec_from_loader(fullname, _PackageLoader(), is_package=True)
        for p in _PREFIXES:
            if fullname == p or fullname.startswith(p + "."):
                real = _TARGET + fullname[len(p):]
                if importlib.util.find_spec(real) is None:
                    return None
                return importlib.util.spec_from_loader(fullname, _AliasLoader(real),
                                                       is_package=fullname == p or None)
        return None


class _PackageLoader(importlib.abc.Loader):
    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def install():
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
    # Names imported before the finder (e.g. a real `nki` elsewhere) are replaced.
    for name in list(sys.modules):
        for p in _PREFIXES:
            if name == p or name.startswith(p + "."):
                del sys.modules[name]
