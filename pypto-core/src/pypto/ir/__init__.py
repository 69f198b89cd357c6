"""pypto's two IR levels: the tensor-expression graph (:mod:`.nodes`) and the loop IR (:mod:`.loops`)."""
