
5
shapeConst*
valueB:*
dtype0
;
dyPlaceholder*
shape:*
dtype0
`
gAvgPoolGradshapedy*
ksize
*
T0*
paddingVALID*
strides
