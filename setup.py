"""Build step: the package's default synonyms.json is the top-level synonyms.json.

There is one source file (the design card's top-level `synonyms.json`); the build copies it
into the package as `zcord/synonyms.json`, so an installed zcord finds it with
importlib.resources. A source checkout (editable install) reads the top-level file directly
(zcord.core.layout.default_synonyms_bytes). Everything else is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent / "synonyms.json"


class BuildPyWithSynonyms(build_py):
    def run(self):
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "zcord" / "synonyms.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(SOURCE), str(target))

    def get_outputs(self, include_bytecode=True):
        outputs = list(super().get_outputs(include_bytecode))
        if not self.editable_mode:
            outputs.append(str(Path(self.build_lib) / "zcord" / "synonyms.json"))
        return outputs


setup(cmdclass={"build_py": BuildPyWithSynonyms})
