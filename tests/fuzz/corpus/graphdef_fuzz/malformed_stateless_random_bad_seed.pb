
3
shapeConst*
valueB:*
dtype0
4
seedConst*
valueB	R*
dtype0	
K
rStatelessRandomUniformshapeseed*
T0*
Tseed0	*
dtype0