class PrototypeInt4WeightOnlyConfig:
    def __init__(
        self, *, group_size: int = 128, int4_choose_qparams_algorithm: str = ..., set_inductor_config: bool = True
    ) -> None: ...
