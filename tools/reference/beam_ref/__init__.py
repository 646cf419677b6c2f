"""beam_ref: a readable PyTorch reference of the Beam architecture, written from shared/spec/BEAM.md.

One module per concept; see tools/reference/README.md for the rounding points and the choices made
for BEAM.md's open questions.
"""
