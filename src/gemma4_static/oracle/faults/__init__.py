"""Faults: the catalogue of porting bugs injected into this runtime, and the self-test that must catch each."""
