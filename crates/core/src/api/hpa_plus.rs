//! `HorizontalPodAutoscalerPlus`: the `autoscaling/v2` HPA spec plus Plimsoll additions.
