"""Drift: does tonight's measure show a drop since the prompt was last accepted?

The reference is one measure of the accepted tag (:mod:`.spec`); every later measure of the same
prompt, tag, model, dataset and check is a *night* compared with it (:mod:`.detector`, exact
conditional e-values of :mod:`.conditional`), read by an operator as a change with an interval
(:mod:`.estimate`) and a line of text (:mod:`.output`). :mod:`.identity` says what makes two
measures comparable; :mod:`.report` is what a measure job's document carries; :mod:`.replay`
re-decides a recorded sequence of nights.

Why not the gate's paired e-process, multiplied night after night against the reference: the
reference is one random draw that every night reuses. Paired with a reference that happened to be
lucky, each night's pairs lean towards a drop, and the product grows for ever: a year of nights
with nothing changed alarms in most years (bench/drift_results.md measures it). The test here
conditions on each sample's passes over all its runs, the reference's included, which makes its
law free of the unknown pass probabilities.
"""
