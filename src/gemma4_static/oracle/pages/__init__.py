"""The reports as web pages: a verify run (:mod:`.verify_page`) and two runs compared
(:mod:`.compare`, :mod:`.compare_page`), each one self-contained HTML file (inline CSS and SVG,
:mod:`.layout`, :mod:`.svg`) drawn from the report's JSON document alone."""
