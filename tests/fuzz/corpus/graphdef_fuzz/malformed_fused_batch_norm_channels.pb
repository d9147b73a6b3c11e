
:
xPlaceholder*
shape:*
dtype0
/
s4Placeholder*
shape:*
dtype0
/
c3Placeholder*
shape:*
dtype0
;
bnFusedBatchNormV3xs4c3c3c3*
T0*
U0