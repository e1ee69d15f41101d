"""Qualcomm's static QNN Gemma 4 as a port (:mod:`.port`), in its 16a8w PT2E scheme (:mod:`.pt2e`), with the stubs
its package chain needs (:mod:`.support`)."""
