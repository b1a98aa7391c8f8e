"""Sample tensor subclasses built with subclassaot: PairTensor, Float8Tensor, JaggedTensor, ShardedTensor."""
