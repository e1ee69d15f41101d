"""The kept pages' snapshot format, in a module that imports neither torch nor the library: under
xdist, syrupy's controller imports each snapshot extension's module to merge the workers' reports
(from the test module, which imports both, that was 1.5 s at the end of every run of the suite)."""

from __future__ import annotations

from importlib import resources

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class PageSnapshot(SingleFileSnapshotExtension):
    """One HTML file per test, the page as drawn but for its stylesheet: ``page.css`` inlined verbatim
    is kept as a link to the file beside the package's pages, so a kept page opens styled in a browser
    from a checkout and the stylesheet is not copied into every kept page."""

    file_extension = "html"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: str, **kwargs: object) -> str:
        stylesheet = resources.files("gemma4_static.oracle.pages").joinpath("page.css").read_text()
        inlined = f"<style>\n{stylesheet}</style>"
        linked = '<link rel="stylesheet" href="../../../../../../src/gemma4_static/oracle/pages/page.css">'
        return super().serialize(data.replace(inlined, linked), **kwargs)
