"""The load-aware peers, modelled as their sources compute: Trimaran's TargetLoadPacking
and LoadVariationRiskBalancing (kubernetes-sigs/scheduler-plugins, fed by paypal's
load-watcher) and Koordinator's LoadAwareScheduling (fed by the koordlet's NodeMetric).
Each module names the upstream files it follows and the constants it takes from them."""
