"""The load-aware peers, modelled from their sources (each module names the files it
follows): Trimaran (scheduler-plugins, fed by load-watcher) and Koordinator.
"""
